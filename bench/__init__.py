"""gridxfer benchmarks against real peers. Run all with `make bench` (python -m bench).

A bench run as a program calls ``exit_on_sigterm()`` first: SIGTERM (``timeout``, a CI job
cancelled) then becomes ``SystemExit``, so that its ``finally`` blocks and context managers
run: the netns testbed, its servers and the scratch directories are torn down, as after
Ctrl-C. Without it a bench killed by ``timeout`` left its namespaces and xrootd servers
running (session 34). Importing the package changes nothing (pytest imports it)."""
from __future__ import annotations

import signal
import sys


def _terminated(signum: int, _frame: object) -> None:
    signal.signal(signum, signal.SIG_DFL)       # a second SIGTERM kills at once
    sys.exit(128 + signum)


def exit_on_sigterm() -> None:
    """In a bench's ``__main__``: SIGTERM raises SystemExit (unless a handler is set)."""
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminated)
