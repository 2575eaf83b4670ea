"""Entry point of `python -m jobs`."""

from jobs.cli import main

raise SystemExit(main())
