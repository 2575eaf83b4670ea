"""The text the job CLI writes: counted nouns, the first line of an error, and the progress line on stderr (a failed
job's error line and lines without colour codes: incluster/logs.py, which the run guardian shares)."""

from __future__ import annotations

import sys


def counted(count: int, noun: str) -> str:
    """`1 attempt`, `2 attempts`."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


class ProgressLine:
    """One progress line on stderr: rewritten in place on a terminal, a new line per change otherwise."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.open = False

    def __call__(self, text: str) -> None:
        if self.tty:
            sys.stderr.write(f"\r\033[K{text}")
            self.open = True
        else:
            sys.stderr.write(f"{text}\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self.open:
            sys.stderr.write("\n")
            self.open = False


def first_line(error: BaseException) -> str:
    """The first line of `error`'s message (its type's name when it has none), at most 200 characters."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
