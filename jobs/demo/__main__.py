"""`python -m jobs.demo`: see jobs/demo/lifecycle.py."""

import sys

from jobs.demo.lifecycle import main

sys.exit(main())
