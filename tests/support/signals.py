"""Children a test interrupts with SIGINT, as Ctrl-C in a terminal interrupts them."""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """A Popen `preexec_fn`: SIGINT back to its default action in the child before it execs. A shell starts a command
    it runs in the background with SIGINT ignored (POSIX Shell Command Language 2.11, an asynchronous list without job
    control; seen here as SigIgn in /proc/<pid>/status under `make test &`), a child inherits that across exec, and
    Python then installs no KeyboardInterrupt handler ("SIGINT is translated into a KeyboardInterrupt exception if the
    parent process has not changed it", Python 3.11 docs, signal module): the test's Ctrl-C would be ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
