"""gfal2 mover: context creation must not leak a blocked signal mask."""
from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("gfal2")

PROBE = """
import signal
from gridxfer.movers.gfal.mover import context
context()                                   # the process's first gfal2 context
context("gsiftp://example.invalid:2811/")   # and one per server
print(sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])))
"""


def test_first_context_leaves_signal_mask_unblocked():
    """gfal2's first creat_context() blocks SIGINT/SIGTERM/SIGALRM in the calling thread;
    children would inherit that (servers ignoring SIGTERM, plugins whose -t never fires)."""
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
