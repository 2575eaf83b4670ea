"""`python -m plan`: the offline plan of a stack (see plan/cli.py)."""

import sys

from plan.cli import main

sys.exit(main())
