"""A GridFTP server closes a control connection left idle past its
``-control-idle-timeout`` (globus-gridftp-server's default: 600 s) with ``421 Idle
Timeout``. gfal2 reuses its sessions (``SESSION_REUSE``) and may send the next request
on one the server has closed: it fails with "421" or "Connection reset by peer". A slow
`make test` met it after 10 idle minutes (test_tpc: a stat before a copy); a campaign
whose link sits idle would too. The gfal2 mover asks a stat, a listing, a checksum or a
mkdir once more on a new session (movers/gfal/mover.py ``on_server``). Real server, real
GSI, a 1 s idle timeout."""
from __future__ import annotations

import os
import time
import zlib

import pytest

from gridxfer.movers.base import TransferParams
from gridxfer.movers.gfal.mover import GfalMover
from gridxfer.testbed import localgrid

pytestmark = pytest.mark.integration


def test_requests_after_the_server_closed_an_idle_session_are_asked_again(make_grid,
                                                                         tmp_path):
    grid = make_grid([localgrid.ServerSpec("idle-gsiftp", "gsiftp", "T1", idle_timeout=1)])
    url = localgrid.put_local(grid, "idle-gsiftp", "idle/f.dat", b"x" * 10)
    base = url.rsplit("/", 1)[0] + "/"
    src = tmp_path / "s.dat"
    src.write_bytes(os.urandom(1 << 20))
    mover = GfalMover()
    asks = [lambda: mover.stat(url).size == 10,
            lambda: mover.checksum(url) == f"{zlib.adler32(b'x' * 10):08x}",
            lambda: {"c.dat", "f.dat"} <= {e.url.rstrip("/").rsplit("/", 1)[1]
                                           for e in mover.listdir(base)},
            lambda: mover.mkdir(base + "sub/") is None]
    mover.copy(f"file://{src}", base + "c.dat",     # a streamed copy on the session
               params=TransferParams(timeout=60, overwrite=True))
    for ask in asks:
        time.sleep(2)                               # the server closes the session (421)
        assert ask()
