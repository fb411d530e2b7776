"""A write that fails on a real xrootd while its close is already in flight leaves nothing.

relay.py (root -> root) and the one-write upload (file -> root) send ``write`` and
``close`` back to back to a far server (pipeline.finish): the close reaches the server
before the client knows how the write went. Issue 21's worry was that a failed write
would then be committed by that close and stay visible at the final name until the
client's ``rm``. xrootd's ofs answers a failed write on a POSC file by unpersisting it
(``XrdOfs::Emsg`` -> ``Unpersist``: the file is unlinked) before it reads the next
request of the connection, so the close that follows finds nothing to keep. These tests
check it on the moment that matters: when the mover starts its own cleanup (before its
``rm``), the final name must already be gone, on disk and for another client.

The destination is a real xrootd whose data dir is a 1 MiB tmpfs (ENOSPC in the write).
"""
from __future__ import annotations

import ctypes
import os
from pathlib import Path

import pytest

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers import TransferParams, get_mover
from gridxfer.movers.xrootd import relay as xrdrelay, relaynative, upload as xrdupload
from gridxfer.movers.xrootd.authz import xpath
from gridxfer.movers.urls import server_of
from gridxfer.movers.xrootd.env import client as xrd
from gridxfer.movers.xrootd.watch import stall_timeout
from gridxfer.testbed import localgrid
from tests.integration.test_xrootd_relaynative import wait_no_jobs

pytestmark = [pytest.mark.integration, pytest.mark.root]

SIZE = 3 << 20          # one write request (<= relay.RELAY_MAX and upload.CHUNK), > the tmpfs


class Witness:
    """Wraps the movers' cleanup: records what the final name was when it started."""

    def __init__(self, monkeypatch, disk: Path) -> None:
        self.disk, self.seen = disk, []
        real = xrdupload._discard

        def discard(handle, dst: str, closed: bool) -> None:
            status, _ = xrd.FileSystem(server_of(dst)).stat(xpath(dst), timeout=10)
            self.seen.append((self.disk.exists(), status.ok))
            real(handle, dst, closed)

        monkeypatch.setattr(xrdrelay, "_discard", discard)
        monkeypatch.setattr(xrdupload, "_discard", discard)


@pytest.fixture
def full(make_grid):
    if os.geteuid() != 0:
        pytest.skip("size-limited endpoints need root (tmpfs)")
    return make_grid([localgrid.ServerSpec("full", "xrootd", "T9", size_limit=1 << 20),
                      localgrid.ServerSpec("feeder", "xrootd", "T9")])


@pytest.mark.parametrize("route,pipelined,checksum", [
    ("relay", True, None), ("relay", False, None), ("relay", True, "adler32"),
    ("upload", True, None), ("upload", False, None),
    ("native", True, None), ("native", True, "adler32"), ("native-upload", True, None)])
def test_a_failed_write_with_its_close_in_flight_leaves_no_file(full, tmp_path, monkeypatch,
                                                                  request, route, pipelined,
                                                                  checksum):
    """Without a checksum: write + close in one flight (the case at issue); with adler32 the
    relay sends write + read-back and closes only after the match (the close not sent).
    ``native``: the C++ relay (always pipelined), whose rm the witness cannot wrap: what
    is left after the copy is what counts, and no Job (its C++ side) outlives it: with its
    cleanup held until the destination's close is answered (relay.cpp's test hook), that
    cleanup's own close meets a file XrdCl holds as closed, which XrdCl never answers."""
    data = os.urandom(SIZE)
    native = route.startswith("native")
    if route in ("relay", "native"):
        src = localgrid.put_local(full, "feeder", "f.dat", data)
    else:
        (tmp_path / "f.dat").write_bytes(data)
        src = f"file://{tmp_path}/f.dat"
    dst = full.endpoints["full"].url + "sub/f.dat"
    if native:
        assert relaynative.available(), "libgxrelay.so is not built: make native"
        lib = relaynative.library()
        wait_no_jobs(lib, stall_timeout() + 60, "a relay Job of an earlier test outlived its copy")
        close_first = ctypes.c_int32.in_dll(lib, "gx_test_close_answered_first")
        close_first.value = 1
        request.addfinalizer(lambda: setattr(close_first, "value", 0))
    else:
        monkeypatch.setattr(relaynative, "functions", None)
        module = xrdrelay if route == "relay" else xrdupload
        monkeypatch.setattr(module, "far", lambda server: pipelined)
        witness = Witness(monkeypatch, full.local_path(dst))
    with pytest.raises(TransferError) as err:
        get_mover(src, dst).copy(src, dst, params=TransferParams(
            timeout=60, checksum=checksum, verify="both" if checksum else "none"))
    assert err.value.error_class is ErrorClass.NO_SPACE, str(err.value)
    if not native:
        assert witness.seen == [(False, False)], "the final name existed before the client's rm"
    assert not full.local_path(dst).exists()
    if native:      # its cleanup's close met a closed file (XrdCl: OK, never answered)
        wait_no_jobs(lib, 30, "the failed copy's Job outlived its cleanup")
