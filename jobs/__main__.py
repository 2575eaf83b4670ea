"""Entry point of `python -m jobs`: `guard` is the run guardian (jobs/guardian.py, which the in-cluster
guardian runs from its own modules only, jobs/guardian_settings.py), every other subcommand the job CLI."""

import sys

if sys.argv[1:2] == ["guard"]:
    from jobs.guardian import main

    raise SystemExit(main(sys.argv[2:]))
else:
    from jobs.cli import main

    raise SystemExit(main())
