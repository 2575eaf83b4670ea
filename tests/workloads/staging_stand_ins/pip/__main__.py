"""Stand-in for `python -m pip install --target DIR ...`: creates DIR and records the arguments there."""

import json
import sys
from pathlib import Path

arguments = sys.argv[1:]
target = Path(arguments[arguments.index("--target") + 1])
target.mkdir(parents=True, exist_ok=True)
(target / "pip-arguments.json").write_text(json.dumps(arguments))
