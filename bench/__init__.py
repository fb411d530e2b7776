"""gridxfer benchmarks against real peers. Run all with `make bench` (python -m bench).

A bench process turns SIGTERM (``timeout``, a CI job cancelled) into ``SystemExit``, so
that its ``finally`` blocks and context managers run: the netns testbed, its servers and
the scratch directories are torn down, as after Ctrl-C. Without it a bench killed by
``timeout`` left its namespaces and xrootd servers running (session 34)."""
from __future__ import annotations

import signal
import sys
import threading


def _terminated(signum: int, _frame: object) -> None:
    signal.signal(signum, signal.SIG_DFL)       # a second SIGTERM kills at once
    sys.exit(128 + signum)


if threading.current_thread() is threading.main_thread() and \
        signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
    signal.signal(signal.SIGTERM, _terminated)
