"""XrdCl's reply handlers run on ONE worker thread in gridxfer (movers/xrootd/env.py:
``WorkerThreads`` 1, measured), and an explicit ``XRD_WORKERTHREADS`` still wins.

Counted from outside: a fresh interpreter imports the module, lets XrdCl make its
PostMaster (a ping to a closed loopback port), and reports its threads; XrdCl's are its
poller, its task manager and the worker threads, so N workers give N + 2 more."""
from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

pytest.importorskip("XRootD.client")

PROBE = """
import os, sys
if sys.argv[1] == "gridxfer":
    from gridxfer.movers.xrootd.env import client
else:
    from XRootD import client
client.FileSystem("root://127.0.0.1:%d/").ping(timeout=1)
print(len(os.listdir(f"/proc/{os.getpid()}/task")), flush=True)
os._exit(0)                     # not XrdCl's exit-time teardown (seconds)
"""


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _threads(kind: str, workers: str | None = None) -> int:
    env = {k: v for k, v in os.environ.items() if k != "XRD_WORKERTHREADS"}
    # the refused connection answered at once, in both kinds of process
    env.update(XRD_CONNECTIONRETRY="1", XRD_CONNECTIONWINDOW="1", XRD_TIMEOUTRESOLUTION="1")
    if workers is not None:
        env["XRD_WORKERTHREADS"] = workers
    out = subprocess.run([sys.executable, "-c", PROBE % _closed_port(), kind], env=env,
                         capture_output=True, text=True, timeout=60, check=True)
    return int(out.stdout.split()[-1])


def test_gridxfer_runs_xrdcl_replies_on_one_worker_thread():
    plain = _threads("plain")                       # XrdCl's default: 3 workers
    assert _threads("gridxfer") == plain - 2


def test_an_explicit_xrd_workerthreads_wins():
    assert _threads("gridxfer", "3") == _threads("plain")
    assert _threads("gridxfer", "5") == _threads("plain") + 2
