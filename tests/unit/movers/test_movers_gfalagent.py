"""The copy children (gfal2 agent, globus-url-copy) die with the campaign process, even when
that is killed with -9: an orphan would go on writing a temporary name the next resume has
already removed."""
from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import time

import psutil
import pytest

pytest.importorskip("gfal2")

AGENT = """
import json, sys, time
from gridxfer.movers.gfal import agent as gfalagent
agent = gfalagent._Agent()
agent.proc.stdin.write(json.dumps({"src": sys.argv[1], "dst": sys.argv[2], "nbstreams": 1,
                                   "timeout": 300, "tcp_buffer": 0}) + "\\n")
agent.proc.stdin.flush()
print(agent.proc.pid, flush=True)
time.sleep(300)
"""


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _open_writer(fifo, deadline: float) -> int:
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:      # ENXIO: nobody reads it yet
            assert exc.errno == errno.ENXIO and time.monotonic() < deadline, exc
            time.sleep(0.01)


def test_copy_child_dies_with_a_campaign_killed_by_sigkill(tmp_path):
    fifo, out = tmp_path / "src", tmp_path / ".f.dat.gxpart-1"
    os.mkfifo(fifo)                 # a source that only moves when the test writes to it
    campaign = subprocess.Popen([sys.executable, "-c", AGENT, f"file://{fifo}", f"file://{out}"],
                                stdout=subprocess.PIPE, text=True)
    agent, w = int(campaign.stdout.readline()), None
    try:
        deadline = time.monotonic() + 30
        w = _open_writer(fifo, deadline)    # the child opens the source once its copy started
        os.write(w, b"x" * 1000)
        while not (out.exists() and out.stat().st_size >= 1000):
            assert time.monotonic() < deadline, "the copy never started"
            time.sleep(0.01)
        campaign.kill()
        campaign.wait()
        deadline = time.monotonic() + 20
        while not _gone(agent):
            assert time.monotonic() < deadline, "the copy child outlived the killed campaign"
            time.sleep(0.02)
    finally:
        if w is not None:
            os.close(w)
        if campaign.poll() is None:
            campaign.kill()
            campaign.wait()
        if not _gone(agent):
            os.kill(agent, signal.SIGKILL)


GUC = """
import sys, threading, time
import psutil
from gridxfer.movers.base import TransferParams
from gridxfer.movers.gridftp.globus import GlobusUrlCopyMover, command
mover, params = GlobusUrlCopyMover(), TransferParams(streams=2, timeout=300)
threading.Thread(target=mover._run, args=(command(sys.argv[1], sys.argv[2], params), params,
                 None), kwargs={"remote_src": False}, daemon=True).start()
me = psutil.Process()
while not (kids := [c for c in me.children() if c.name() == "globus-url-copy"]):
    time.sleep(0.01)                # setpriv --pdeathsig execs it in place: same pid
print(kids[0].pid, flush=True)
time.sleep(300)
"""


@pytest.mark.skipif(not shutil.which("globus-url-copy"), reason="no globus-url-copy")
def test_globus_url_copy_dies_with_a_campaign_killed_by_sigkill(tmp_path):
    fifo, out = tmp_path / "src", tmp_path / ".f.dat.gxpart-1"
    os.mkfifo(fifo)
    campaign = subprocess.Popen([sys.executable, "-c", GUC, f"file://{fifo}", f"file://{out}"],
                                stdout=subprocess.PIPE, text=True)
    guc, w = int(campaign.stdout.readline()), None
    try:
        w = _open_writer(fifo, time.monotonic() + 30)
        os.write(w, b"x" * 1000)
        deadline = time.monotonic() + 30
        while not out.exists():         # the copy has started: its destination is open
            assert time.monotonic() < deadline and not _gone(guc), "the copy never started"
            time.sleep(0.01)
        campaign.kill()
        campaign.wait()
        deadline = time.monotonic() + 20
        while not _gone(guc):
            assert time.monotonic() < deadline, "globus-url-copy outlived the killed campaign"
            time.sleep(0.02)
    finally:
        if w is not None:
            os.close(w)
        if campaign.poll() is None:
            campaign.kill()
            campaign.wait()
        if not _gone(guc):
            os.kill(guc, signal.SIGKILL)
