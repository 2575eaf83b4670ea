"""`python -m infra plan ...`: the offline plan under its earlier name, kept so that users' commands do not
break. It delegates to the plan tool on top (`python -m plan`): the one upward import below the program,
named in the import contract's ignore list (pyproject.toml)."""

import argparse
import sys

from plan.cli import add_plan_arguments, run


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m infra`: its one command, `plan`, is `python -m plan`."""
    parser = argparse.ArgumentParser(prog="python -m infra", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    add_plan_arguments(commands.add_parser("plan", help="render the stack offline under Pulumi's mocks"))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
