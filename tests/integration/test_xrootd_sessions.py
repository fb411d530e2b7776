"""A session opened ahead (XRootDMover.connect, engine/sessions.py) on a real xrootd: the
login happens without any request of ours, and the copies that follow use that session
(no second connection)."""
from __future__ import annotations

import os
import time
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import pytest

from gridxfer.movers import TransferParams
from gridxfer.movers.xrootd.mover import XRootDMover
from gridxfer.testbed.localgrid import ServerSpec

pytestmark = pytest.mark.integration


def sessions_to(port: int) -> list[tuple[str, int]]:
    """This process's established TCP connections to ``port`` (their local ends)."""
    return sorted(tuple(c.laddr) for c in psutil.Process().net_connections("tcp")
                  if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED)


def wait_for(what, limit: float = 20.0):
    end = time.monotonic() + limit
    while not (got := what()) and time.monotonic() < end:
        time.sleep(0.05)
    return got


def test_connect_logs_in_and_the_copies_use_that_session(make_grid, tmp_path):
    ep = make_grid([ServerSpec("fresh", "xrootd", "T9")]).endpoints["fresh"]
    port = urlsplit(ep.url).port
    assert port and sessions_to(port) == [], "this process already talks to a new server"
    log = Path(ep.log)
    logins = lambda: log.read_text(errors="replace").count(f".{os.getpid()}:")  # noqa: E731
    assert logins() == 0

    mover = XRootDMover()
    mover.connect(ep.url)
    assert wait_for(lambda: logins() == 1), "no login of this process in the server's log"
    session = wait_for(lambda: sessions_to(port))
    assert len(session) == 1, session
    mover.connect(ep.url + "other/dir/")        # the same server: nothing more is sent

    for i in range(3):
        (src := tmp_path / f"f{i}.dat").write_bytes(os.urandom(4096))
        mover.copy(f"file://{src}", f"{ep.url}f{i}.dat",
                   params=TransferParams(timeout=60, checksum="adler32", verify="both"))
    assert sessions_to(port) == session, "the copies opened a session of their own"
    assert logins() == 1
