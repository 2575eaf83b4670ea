"""Stands in for verl in the job tests: prints verl-style step lines, then exits with argv[1]."""

import sys

exit_code, steps = int(sys.argv[1]), int(sys.argv[2])
for step in range(1, steps + 1):
    score = step / (steps + 1)
    print(f"(TaskRunner pid=1) step:{step} - critic/score/mean:np.float64({score}) - actor/pg_loss:0.125", flush=True)
if exit_code:
    print(f"stand-in trainer failing with exit code {exit_code}", flush=True)
sys.exit(exit_code)
