"""Entry point of `python -m jobs`: `guard` is the run guardian (jobs/guardian.py, which the in-cluster
guardian runs from its own modules only, jobs/guardian_settings.py), every other subcommand the job CLI.
Ctrl-C while the modules load (a second or so) is one line and exit 130, as it is later."""

import sys

try:
    if sys.argv[1:2] == ["guard"]:
        from jobs.guardian import main

        argv = sys.argv[2:]
    else:
        from jobs.cli import main

        argv = sys.argv[1:]
except KeyboardInterrupt:
    print("interrupted", file=sys.stderr)
    raise SystemExit(130) from None

raise SystemExit(main(argv))
