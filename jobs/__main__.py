"""Entry point of `python -m jobs`: `guard` is the run guardian in the foreground (jobs/guardian/foreground.py
around the loop of incluster/guardian/), every other subcommand the job CLI.
Ctrl-C while the modules load (a second or so) is one line and exit 130, as it is later."""

import sys

try:
    if sys.argv[1:2] == ["guard"]:
        from jobs.guardian.foreground import main

        argv = sys.argv[2:]
    else:
        from jobs.cli.main import main

        argv = sys.argv[1:]
except KeyboardInterrupt:
    print("interrupted", file=sys.stderr)
    raise SystemExit(130) from None

raise SystemExit(main(argv))
