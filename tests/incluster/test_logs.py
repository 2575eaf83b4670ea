"""The error line of a failed job's log (incluster/logs.py): what `python -m jobs status` shows and the run guardian
records as a failure's reason."""

from __future__ import annotations

from incluster.logs import error_line, plain

TRACEBACK_LOG = """(TaskRunner pid=812) step:1 - critic/score/mean:np.float64(0.1)
(TaskRunner pid=812, ip=10.0.0.3) Traceback (most recent call last):
(TaskRunner pid=812, ip=10.0.0.3)   File "/verl/trainer/main_ppo.py", line 42, in run
(TaskRunner pid=812, ip=10.0.0.3)     raise ValueError("reward function gsm8k not found")
(TaskRunner pid=812, ip=10.0.0.3) ValueError: reward function gsm8k not found
Traceback (most recent call last):
  File "/verl/trainer/main_ppo.py", line 10, in <module>
    ray.get(runner.run.remote())
ray.exceptions.RayTaskError(ValueError): ray::TaskRunner.run() (pid=812, ip=10.0.0.3)
---------------------------------------
Job 'dev-abc-1' failed
"""


def test_the_error_line_is_the_last_tracebacks_final_line_without_rays_prefix():
    assert (
        error_line(TRACEBACK_LOG)
        == "ray.exceptions.RayTaskError(ValueError): ray::TaskRunner.run() (pid=812, ip=10.0.0.3)"
    )
    only_actor = TRACEBACK_LOG.split("Traceback (most recent call last):\n  File")[0]
    assert error_line(only_actor) == "ValueError: reward function gsm8k not found"


def test_without_a_traceback_the_error_line_is_the_last_line_that_looks_like_an_error():
    assert error_line("step 1\nCUDA error: out of memory\nstep 2 done\n") == "CUDA error: out of memory"
    assert error_line("step 1\nstep 2\n") is None


def test_colour_codes_are_stripped():
    assert plain("\x1b[36m(TaskRunner pid=812)\x1b[0m ValueError: boom") == "(TaskRunner pid=812) ValueError: boom"
    assert error_line("\x1b[36m(TaskRunner pid=812)\x1b[0m ValueError: failed to load") == "ValueError: failed to load"
