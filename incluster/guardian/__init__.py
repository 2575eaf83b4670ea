"""The run guardian: it follows the run's newest attempt and decides what comes next.

`decide(state) -> Action` is the whole policy, pure; `run()` is the thin loop around it that reads the
cluster and the run's record, applies one action at a time and appends every decision to the record,
once per attempt (`<run dir>/attempts.jsonl`, incluster/record.py). The rules:

- an attempt PENDING or RUNNING: wait;
- an attempt FAILED because GPU capacity went away, judged from facts, never from words a trainer logs (capacity_lost:
  a Ray node with GPUs died while it ran; Ray's own node-died sentence in its message or last lines; a GPU worker
  pod that Kubernetes ended with its node, graceful node shutdown or a deleted or unreachable node; a GPU node whose
  Ready condition turned while it ran; fewer than gpu.nodes full GPU nodes up): `failed`, then `recovering` with a
  backoff (BACKOFF: 30 s doubling to 10 min), then the readiness gate (readiness.wait_for_gpus, with its progress line)
  and the next attempt through run_submission.ensure_run (never two live attempts): its wrapper resumes from the newest
  complete checkpoint (`submitted`, with that step). At most maxRecoveries recoveries per run, then `gave-up`;
- an attempt the run's record (or its log, or this guardian) knows and the Ray head does not: a new head, whose job
  table started empty (no GCS fault tolerance). It is lost capacity like a lost node: the readiness gate waits for the
  GPU workers to rejoin the new head, the preflight runs on it (a head it has not checked), and the next attempt's
  number continues the record's;
- an attempt refused by its wrapper (checkpoints, none complete), STOPPED, or FAILED for any other reason
  (decided once SETTLE_SECONDS have passed without evidence of lost capacity, the time Ray takes to mark a
  lost node dead): `failed`, then `not-retried` with the reason (for a FAILED one, its error line as `python -m jobs
  status` finds it, incluster/logs.py) and its last log lines;
- before it submits an attempt on a Ray cluster that no preflight has checked (a fresh RayCluster: its head is
  not the one the newest preflight result names, incluster/preflight/driver.py `rayHead`), the settings' preflight
  runs (incluster/preflight/gate.py, job.preflight; never before a resume on the same cluster): `preflight-passed`,
  or `preflight-failed` and `not-retried` with one line per bad node (cordoned first with job.cordonBadNodes);
- SUCCEEDED after a deadline stop before the schedule's end (NeMo-RL's `checkpoint_must_save_by`: it saves, prints
  "Timeout has been reached, stopping training early" and exits 0; the wrapper's last line names the step saved,
  incluster/attempt.py DEADLINE_STOP_LINE): `deadline-stop`, then the next attempt resumes from that step through the
  readiness gate, i.e. on the next capacity (not a recovery: maxRecoveries is not spent). A deadline stop that
  saved nothing ends FAILED (the wrapper's UNSAVED_STOP_EXIT) and is judged as a failure;
- a verl attempt RUNNING with a known end of its GPU nodes (incluster/deadline.py: verl 0.9.1's default trainer reads no
  deadline): once the newest checkpoint it saved is the last that completes before the save-by time
  (deadline.stop_due), `deadline-stop`, then the attempt is stopped; STOPPED after a `deadline-stop`, the next
  attempt resumes from that step on the next capacity, as above;
- SUCCEEDED: `succeeded`; when the settings' schedule asks for more (runs.extends) the next attempt
  continues the run (not after a preflight that refused its cluster: the run is over); else the export
  (`export-submitted`, through Hooks.export), and `exported` once that export job SUCCEEDED on the Ray head (nothing
  is done while it is live: its end is the guardian's to record);
- once the run is over (succeeded, not retried, gave up) and nothing is live on the cluster for
  idleMinutes: `scaled-to-zero` (through Hooks.scale_to_zero; idleMinutes 0 never); GPU workers that come back
  after it with nothing live (a RayCluster made anew by `pulumi up`, an unpark) are scaled to zero again;
- then, with storage.parkWhenIdle and nothing live, the run is parked in the parked bucket (through Hooks.park,
  incluster/park.py park_run, as the Google service account its Kubernetes one is linked to): `parked`, or
  `park-failed` with why, tried again after a backoff up to policy.PARK_TRIES times; with a park target, before each attempt it submits, a parked
  marker is marked stale (through Hooks.mark_stale, incluster/park.py mark_stale), and nothing is submitted when it
  cannot be.

`python -m jobs guard --stack NAME [--address URL] [--data-root DIR] [--entrypoint CMD] [--follow] [--take-over]`
runs it in the foreground until the run is over and nothing is left to do (with `--follow`, until Ctrl-C); `python -m
jobs guard --settings FILE --address URL`, run as `python3 -m incluster.guardian`, is the in-cluster form (it always
follows), from the shipped files alone (incluster/shipping.py): no Pulumi, no typed config.

One guardian at a time (incluster/lease.py): where the Kubernetes API server is at hand, a guardian acts (records a
decision, submits, exports, scales) only while it holds the run guardian's Lease, checked before each action.
The in-cluster one waits while another holds it; the foreground one refuses to start while another holds it
(unless `--take-over`) and stops with exit 2 if it loses it.
Exit codes of the foreground form, once the run is over and nothing is left to do (its last line says how it ended):
0 the run succeeded; 1 it ended otherwise (not retried, given up, stopped at its budget); 2 bad input, an
unreachable dashboard at the start, or another guardian holding the Lease (one line); 130 interrupted.
"""

from incluster.guardian.command import main

__all__ = ["main"]
