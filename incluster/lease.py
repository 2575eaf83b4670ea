"""One guardian at a time: the run guardian holds a `coordination.k8s.io/v1` Lease while it acts.

The in-cluster guardian (the Deployment of jobs/guardian/objects.py) and a foreground `python -m jobs guard` would
otherwise both act on one run: each records a recovery (counted twice against job.maxRecoveries), each submits an
export of the same step. The holder of the Lease `LEASE_NAME` in the run's namespace acts; every other guardian
waits (the in-cluster one) or refuses in one line (the foreground one, unless `--take-over`).

The protocol is client-go's leader election (kubernetes/client-go v0.36.3 tools/leaderelection/leaderelection.go),
with its default timings (L132, L137, L142: "Core clients default this value to 15 seconds", 10 s, 2 s):

- the holder writes `spec.holderIdentity`, `leaseDurationSeconds`, `acquireTime`, `renewTime` and
  `leaseTransitions` (resourcelock/leaselock.go L149-157) and renews every RENEW_INTERVAL_SECONDS;
- a Lease that is absent (404) is created (tryAcquireOrRenew L460-470); one held by another is taken only once
  it has not changed for its leaseDurationSeconds as this process's own clock measures it (L480: client-go
  trusts no other clock's timestamps), then with leaseTransitions + 1 (L492);
- every write is an update carrying the resourceVersion that was read: the API server answers 409 Conflict when
  another holder wrote in between (kubernetes/apiserver v0.36.3 pkg/registry/generic/registry/store.go L743-744;
  Leases allow no unconditional update, kubernetes/kubernetes pkg/registry/coordination/lease/strategy.go
  `AllowUnconditionalUpdate` false), so of two writers exactly one wins;
- the holder stops acting as soon as a renewal shows another holder, and in any case once RENEW_DEADLINE_SECONDS
  pass without a renewal (before the 15 s another candidate waits: the two never act at once);
- on its way out the holder releases the Lease: empty holder, leaseDurationSeconds 1 (release, L315-340), and
  only while it holds it (L330-331): a Lease another guardian took is left to it;
- the timings keep NewLeaderElector's rules (L77-82): leaseDuration > renewDeadline > retryPeriod * JitterFactor
  (1.2, L72);
- a holder whose renewals keep failing is unhealthy once it has not renewed for the lease duration: client-go's
  `Check` (L516-534), which `tools/leaderelection/healthzadaptor.go` (L25-31) serves to the kubelet's liveness probe
  "to take down the process"; here `failure` says so, and the in-cluster guardian exits (incluster/guardian/loop.py)
  and stops its heartbeat (incluster/heartbeat.py). Every failure of a renewal, whatever the API server
  answered (a cut body, a 200 that is not a Lease), is one more failed try kept in `last_error`, never the end of the
  renewing thread.

Stdlib and requests only: it runs in the guardian's pod (incluster/shipping.py).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from core import names
from incluster.endpoint import Endpoint
from incluster.job_client import DEADLINES
from incluster.readiness import REPORT_EVERY_SECONDS

LEASE_NAME = names.GUARDIAN
"""The Lease of the stack's run guardian, in names.NAMESPACE (the Role grants get and update on it alone)."""

LEASE_DURATION_SECONDS = 15
"""leaseDurationSeconds: how long a candidate waits on an unchanged Lease before it takes it (client-go's 15 s)."""

RENEW_DEADLINE_SECONDS = 10.0
"""The holder stops acting when this long passes without a successful renewal (client-go's RenewDeadline, 10 s),
before any candidate may take the Lease (15 s)."""

RENEW_INTERVAL_SECONDS = 2.0
"""The holder renews, and a candidate retries, this often (client-go's RetryPeriod, 2 s): a holder stops acting
within one interval of another taking the Lease."""

TAKE_OVER_WAIT_SECONDS = float(LEASE_DURATION_SECONDS)
"""After `--take-over` takes the Lease from a live holder, the wait before the first action: the same wait a lapse
would have given, in which the old holder's next renewal (within 2 s) shows it the new holder."""

API_PATH = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
"""The Leases of a namespace on the API server."""


class LeaseError(Exception):
    """The Lease cannot be read or written; one line."""


class LeaseHeld(Exception):
    """Another guardian holds the Lease; the message is the one-line refusal."""


@dataclass(frozen=True)
class LeaseRecord:
    """A Lease as read: its spec and the resourceVersion an update must carry."""

    holder: str
    """spec.holderIdentity ("" when released)."""
    duration: int
    """spec.leaseDurationSeconds."""
    acquire_time: str
    """spec.acquireTime (RFC 3339 with microseconds)."""
    renew_time: str
    """spec.renewTime."""
    transitions: int
    """spec.leaseTransitions."""
    resource_version: str
    """metadata.resourceVersion."""


def micro_time(at: float) -> str:
    """A Kubernetes MicroTime: RFC 3339 in UTC with microseconds."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _seconds(stamp: str) -> float | None:
    try:
        return datetime.strptime(stamp.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
    except ValueError:
        return None


def record_of(lease: dict[str, Any]) -> LeaseRecord:
    """The LeaseRecord of a Lease object."""
    spec = lease.get("spec") or {}
    return LeaseRecord(
        holder=str(spec.get("holderIdentity") or ""),
        duration=int(spec.get("leaseDurationSeconds") or LEASE_DURATION_SECONDS),
        acquire_time=str(spec.get("acquireTime") or ""),
        renew_time=str(spec.get("renewTime") or ""),
        transitions=int(spec.get("leaseTransitions") or 0),
        resource_version=str((lease.get("metadata") or {}).get("resourceVersion") or ""),
    )


def in_cluster_identity() -> str:
    """The in-cluster guardian's holderIdentity: its pod's name (the pod's HOSTNAME)."""
    return f"in-cluster guardian {os.environ.get('HOSTNAME') or socket.gethostname()}"


def foreground_identity() -> str:
    """A foreground guardian's holderIdentity: who runs it, where, and its process."""
    user = os.environ.get("USER") or os.environ.get("LOGNAME") or f"uid {os.getuid()}"
    return f"python -m jobs guard of {user}@{socket.gethostname()} pid {os.getpid()}"


class Lease:
    """One guardian's hold on the Lease: `try_acquire_or_renew` (one client-go try), `held` (may it act now),
    `take` (the explicit take-over), `release`, and a renewing thread (`start_renewing`, `stop`)."""

    def __init__(
        self,
        api: Endpoint,
        identity: str,
        namespace: str = names.NAMESPACE,
        name: str = LEASE_NAME,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api, self.identity, self.namespace, self.name = api, identity, namespace, name
        self.clock, self.monotonic = clock, monotonic
        self.observed: LeaseRecord | None = None
        """The Lease as last read or written."""
        self._observed_at = 0.0
        self._renewed_at: float | None = None
        self.last_error = ""
        """Why the renewing thread's last try failed to reach the Lease ("" after a try that reached it)."""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def where(self) -> str:
        """`namespace/name` of the Lease, for messages."""
        return f"{self.namespace}/{self.name}"

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        import requests  # lazy: every `python -m jobs` start imports it (via the guardian); requests adds 50-130 ms

        try:
            return requests.request(
                method,
                f"{self.api.address}{API_PATH.format(namespace=self.namespace)}{path}",
                json=body,
                headers=dict(self.api.headers),
                verify=self.api.verify,
                timeout=DEADLINES.request,
            )
        except (requests.exceptions.Timeout, requests.exceptions.ConnectionError):
            raise LeaseError(
                f"the API server at {self.api.address} did not answer about the Lease {self.where}"
            ) from None
        except requests.exceptions.RequestException as error:
            raise LeaseError(
                f"the API server at {self.api.address} answered no whole answer about the Lease {self.where}"
                f" ({type(error).__name__})"
            ) from None

    def _lease_of(self, answer: Any, doing: str) -> LeaseRecord:
        """The LeaseRecord of a 2xx answer; LeaseError when its body is not a Lease (HTML from a proxy, a cut body)."""
        try:
            body = answer.json()
            if not isinstance(body, dict) or body.get("kind") != "Lease":
                raise ValueError(f"kind {body.get('kind') if isinstance(body, dict) else type(body).__name__!r}")
            return record_of(body)
        except (ValueError, TypeError) as error:
            kind = answer.headers.get("Content-Type") or "no Content-Type"
            raise LeaseError(
                f"the API server answered HTTP {answer.status_code} {doing} the Lease {self.where} with no Lease"
                f" ({kind}: {' '.join(str(error).split())[:80]})"
            ) from None

    def read(self) -> LeaseRecord | None:
        """The Lease now (None when absent), remembered with when this process saw it change."""
        answer = self._request("GET", f"/{self.name}")
        if answer.status_code == 404:
            record = None
        elif answer.status_code >= 400:
            raise LeaseError(f"the API server answered HTTP {answer.status_code} reading the Lease {self.where}")
        else:
            record = self._lease_of(answer, "reading")
        self._observe(record)
        return record

    def _observe(self, record: LeaseRecord | None) -> None:
        if record != self.observed:
            self.observed, self._observed_at = record, self.monotonic()

    def _object(self, spec: dict[str, Any], resource_version: str | None) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if resource_version is not None:
            metadata["resourceVersion"] = resource_version
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}

    def _spec(self, holder: str, duration: int, acquired: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "acquireTime": acquired,
            "renewTime": micro_time(self.clock()),
            "leaseTransitions": transitions,
        }

    def _write(self, spec: dict[str, Any], current: LeaseRecord | None) -> bool:
        """Create (no current Lease) or update with the current resourceVersion; False when another writer won
        (409: AlreadyExists on create, Conflict on update)."""
        if current is None:
            answer = self._request("POST", "", self._object(spec, None))
        else:
            answer = self._request("PUT", f"/{self.name}", self._object(spec, current.resource_version))
        if answer.status_code == 409:
            return False
        if answer.status_code >= 400:
            verb = "creating" if current is None else "updating"
            raise LeaseError(f"the API server answered HTTP {answer.status_code} {verb} the Lease {self.where}")
        self._observe(self._lease_of(answer, "creating" if current is None else "updating"))
        return True

    def held_by_another(self) -> bool:
        """Whether the Lease as last seen names another holder that changed it within its duration (this
        process's clock: client-go's rule)."""
        record = self.observed
        return (
            record is not None
            and record.holder not in ("", self.identity)
            and self.monotonic() < self._observed_at + record.duration
        )

    def try_acquire_or_renew(self) -> bool:
        """One try: create the Lease, renew ours, or take a lapsed or released one. Whether this guardian holds
        it now; a false answer leaves `observed` naming who does."""
        with self._lock:
            current = self.read()
            if self.held_by_another():
                self._renewed_at = None
                return False
            ours = current is not None and current.holder == self.identity
            now = micro_time(self.clock())
            if current is None:
                spec = self._spec(self.identity, LEASE_DURATION_SECONDS, now, 0)
            elif ours:
                spec = self._spec(self.identity, LEASE_DURATION_SECONDS, current.acquire_time, current.transitions)
            else:
                spec = self._spec(self.identity, LEASE_DURATION_SECONDS, now, current.transitions + 1)
            if not self._write(spec, current):
                self._renewed_at = None
                self.read()
                return False
            self._renewed_at = self.monotonic()
            return True

    def take(self) -> LeaseRecord | None:
        """Take the Lease from its live holder now (`--take-over`): an update with leaseTransitions + 1 and the
        resourceVersion just read; returns the record it replaced. LeaseError when another writer keeps winning."""
        with self._lock:
            for _ in range(3):
                current = self.read()
                if current is None:
                    spec = self._spec(self.identity, LEASE_DURATION_SECONDS, micro_time(self.clock()), 0)
                else:
                    spec = self._spec(
                        self.identity, LEASE_DURATION_SECONDS, micro_time(self.clock()), current.transitions + 1
                    )
                if self._write(spec, current):
                    self._renewed_at = self.monotonic()
                    return current
        raise LeaseError(f"another guardian kept writing the Lease {self.where}; try again")

    def held(self) -> bool:
        """Whether this guardian may act now: it holds the Lease as last seen and renewed it within
        RENEW_DEADLINE_SECONDS."""
        renewed = self._renewed_at
        record = self.observed
        return (
            renewed is not None
            and record is not None
            and record.holder == self.identity
            and self.monotonic() - renewed < RENEW_DEADLINE_SECONDS
        )

    def confirm(self) -> dict[str, Any] | None:
        """Just before a record entry is written: the Lease read now, and its stamp for the entry (`holder`,
        `transitions`) while this guardian still holds it and renewed it within RENEW_DEADLINE_SECONDS; None when it
        does not. A Lease that cannot be read now counts as held while `held` says so: no other guardian may take it
        before the lease duration, which is longer."""
        with self._lock:
            try:
                self.read()
            except Exception:  # noqa: BLE001 - an unreadable Lease leaves `held` to judge from the last renewal
                pass
            record = self.observed
            if record is None or not self.held():
                return None
            return {"holder": record.holder, "transitions": record.transitions}

    def waiting_line(self) -> str:
        """Why a guardian that does not hold the Lease waits: who holds it, or why it cannot be reached."""
        if self.last_error:
            return f"{self.last_error}: this guardian waits to act"
        holder = (self.observed.holder if self.observed else "") or "no guardian"
        return f"{holder} holds the Lease {self.where}: this guardian waits to act"

    def holder_line(self) -> str:
        """Who holds the Lease as last seen, and when it was last renewed (by the API server's timestamps)."""
        record = self.observed
        if record is None or not record.holder:
            return f"no guardian holds the Lease {self.where}"
        renewed = _seconds(record.renew_time)
        ago = f" (renewed {max(0.0, self.clock() - renewed):.0f} s ago)" if renewed is not None else ""
        return f"{record.holder} holds the Lease {self.where}{ago}"

    def renew_forever(self) -> None:
        """The renewing thread's body: try every RENEW_INTERVAL_SECONDS until `stop` (an unreachable API server
        is another try; `held` turns false after RENEW_DEADLINE_SECONDS without a renewal)."""
        while not self._stop.is_set():
            self.renew_once()
            self._stop.wait(RENEW_INTERVAL_SECONDS)

    def renew_once(self) -> bool:
        """One try of the renewing thread: whether this guardian holds the Lease. Any failure (LeaseError, or
        anything else an answer of the API server or this code raises) is one failed try, kept in `last_error`: the
        thread must outlive every answer, as client-go's renew loop outlives every failed try (leaderelection.go
        L284-306)."""
        try:
            held = self.try_acquire_or_renew()
        except LeaseError as error:
            self.last_error = str(error)
            return False
        except Exception as error:  # noqa: BLE001 - any failure is a failed try; the thread goes on
            self.last_error = (
                f"renewing the Lease {self.where} failed: {type(error).__name__}: {' '.join(str(error).split())[:120]}"
            )
            return False
        self.last_error = ""
        return held

    def failure(self) -> str | None:
        """Why this guardian can no longer lead and must exit so that Kubernetes restarts it, or None: its renewing
        thread ended, or it holds the Lease as last seen and has not renewed it for LEASE_DURATION_SECONDS (another
        may have taken it). client-go's `Check` (leaderelection.go L516-534) with no extra tolerance: a guardian only
        waiting for another holder is healthy."""
        thread = self._thread
        if thread is not None and not thread.is_alive() and not self._stop.is_set():
            return f"the renewing thread of the Lease {self.where} ended ({self.last_error or 'no error kept'})"
        renewed, record = self._renewed_at, self.observed
        if renewed is None or record is None or record.holder != self.identity:
            return None
        since = self.monotonic() - renewed
        if since <= LEASE_DURATION_SECONDS:
            return None
        return (
            f"this guardian held the Lease {self.where} and has not renewed it for {since:.0f} s, longer than its"
            f" {LEASE_DURATION_SECONDS} s ({self.last_error or 'no error kept'})"
        )

    def start_renewing(self) -> None:
        """Renew (or, while another holds it, keep trying to acquire) in a daemon thread."""
        self._stop.clear()
        self._thread = threading.Thread(target=self.renew_forever, name=f"lease-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop renewing and release the Lease if this guardian holds it (empty holder, leaseDurationSeconds 1),
        so that the next guardian need not wait out the duration. Best effort: a failed release lapses."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(DEADLINES.connect + DEADLINES.read + RENEW_INTERVAL_SECONDS)
        with self._lock:
            try:
                current = self.read()
                if current is not None and current.holder == self.identity:
                    self._write(self._spec("", 1, current.acquire_time, current.transitions), current)
            except LeaseError:
                pass
            self._renewed_at = None


def current_entries(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run's record entries a reader may trust. Each entry a guardian holding the Lease writes carries its term
    (`lease`: holder and leaseTransitions, Lease.confirm); a term that another term has written after writes no more,
    so an entry of a superseded term was written after its writer lost the Lease (it passed its check just before
    the take-over) and is dropped. Leader election is no fence (client-go v0.36.3 tools/leaderelection/
    leaderelection.go L17-20): the check narrows the window, the stamp lets a reader close it. Entries without a
    term (no Lease: a Ray head on this machine, or written before terms were stamped) are kept."""
    superseded: set[tuple[Any, Any]] = set()
    last: tuple[Any, Any] | None = None
    kept = []
    for item in entries:
        stamp = item.get("lease")
        if isinstance(stamp, dict):
            term = (stamp.get("holder"), stamp.get("transitions"))
            if term in superseded:
                continue
            if last is not None and term != last:
                superseded.add(last)
            last = term
        kept.append(item)
    return kept


def refusal(lease: Lease, run: str) -> str:
    """The foreground guardian's one line when another guardian holds the Lease."""
    return (
        f"{lease.holder_line()} and guards run {run}: this guardian does not act beside it; follow that one"
        f" (kubectl -n {lease.namespace} logs deploy/{names.GUARDIAN} -f), or pass --take-over to guard from here"
        f" (the other one then waits until this one exits)"
    )


def acquire_in_foreground(
    lease: Lease,
    run: str,
    take_over: bool,
    report: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Hold the Lease before the foreground guardian's first action. A live holder (renewed within its duration
    by this machine's clock, or seen to renew while this one waits): LeaseHeld with `refusal`, or with
    `take_over` the explicit take and TAKE_OVER_WAIT_SECONDS. A holder that looks gone: wait, as client-go does,
    until the Lease has not changed for its duration, then take it."""
    first = lease.read()
    shown = 0.0
    while not lease.try_acquire_or_renew():
        record = lease.observed
        assert record is not None
        renewed = _seconds(record.renew_time)
        recent = renewed is not None and lease.clock() < renewed + record.duration
        if recent or (first is not None and record.resource_version != first.resource_version):
            if not take_over:
                raise LeaseHeld(refusal(lease, run))
            line = lease.holder_line()
            lease.take()
            report(
                f"{run}: --take-over: {line}; took it, and acts in {TAKE_OVER_WAIT_SECONDS:g} s, once that guardian"
                f" has seen at its next renewal (every {RENEW_INTERVAL_SECONDS:g} s) that it lost it"
            )
            sleep(TAKE_OVER_WAIT_SECONDS)
            return
        now = lease.monotonic()
        if now - shown >= REPORT_EVERY_SECONDS:
            report(
                f"{run}: {lease.holder_line()}; it looks gone, so this guardian takes it once unchanged for {record.duration} s"
            )
            shown = now
        sleep(RENEW_INTERVAL_SECONDS)
