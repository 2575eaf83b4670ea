"""`python3 -m incluster.guardian`: the in-cluster guardian's command (incluster/guardian/command.py `main`)."""

from incluster.guardian.command import main

if __name__ == "__main__":
    raise SystemExit(main())
