"""The small-file relay in C++ (movers/xrootd/native/relay.cpp via relaynative.py) on real
xrootd servers: what only it can show. (The contract it shares with the Python relay runs
on both: test_xrootd_relay.py's ``pair`` fixture, test_xrootd_failed_write_posc.py and the
kill -9 campaign tests.)

* a read-back that differs (relay.cpp's test hook damages it as it arrives);
* the catalogue's adler32 checked before anything is written;
* ztn + SciTokens on the real t2-tok1: the token only in the request, never in a message;
* a cancel while the destination's open is in flight on a frozen (SIGSTOP) server returns
  at once, and once the server wakes the open it answers is removed by the relay itself:
  nothing is left, and no Job (the C++ side of a copy) outlives its last answer.
"""
from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import TokenPair, TransferParams
from gridxfer.movers.xrootd import relayabi, relaynative
from gridxfer.movers.xrootd.watch import stall_timeout
from gridxfer.testbed import localgrid
from gridxfer.testbed import tokens as tok_mod
from gridxfer.testbed.localgrid import ServerSpec
from gridxfer.testbed.procs import pidfile_procs
from tests.integration.test_xrootd_relay import Pair, adler, copy

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def native():
    """The library, once no Job of an earlier test in this process is alive: the count is
    the process's, and a copy cancelled or cut off elsewhere (a server stopped under it)
    keeps its Job until its requests time out, up to the stall timeout and XrdCl's
    timeout tick later. (A Job that never went, found by fresh-clone runs and CI as this
    module began, was relay.cpp counting a cleanup close of an already closed file as sent:
    test_xrootd_failed_write_posc.py now checks that case.)"""
    assert relaynative.available(), "libgxrelay.so is not built: make native"
    lib = relaynative.library()
    wait_no_jobs(lib, stall_timeout() + 60, "a relay Job of an earlier test outlived its copy")
    return lib


def jobs_alive(lib: ctypes.CDLL) -> int:
    return ctypes.c_int32.in_dll(lib, "gx_jobs_alive").value


def wait_no_jobs(lib: ctypes.CDLL, limit: float = 30,
                 why: str = "a relay Job outlived its copy") -> None:
    end = time.monotonic() + limit
    while jobs_alive(lib) and time.monotonic() < end:
        time.sleep(0.05)
    assert jobs_alive(lib) == 0, why


@pytest.fixture
def damage_back(native):
    """relay.cpp's test hook: the next N read-backs arrive damaged (mode 0: a byte
    flipped, 1: the last byte dropped)."""
    count = ctypes.c_int32.in_dll(native, "gx_test_damage_back")
    mode = ctypes.c_int32.in_dll(native, "gx_test_damage_mode")

    def arm(n: int, how: int) -> None:
        count.value, mode.value = n, how

    yield arm
    count.value = mode.value = 0


@pytest.mark.parametrize("how", [0, 1], ids=["flip", "truncate"])
def test_a_read_back_that_differs_twice_fails_and_leaves_nothing(local_grid, damage_back,
                                                                 native, how):
    """Both read-backs differ: a (retryable) CHECKSUM error, and the unclosed POSC file is
    removed; one that differs once (a server that read before the write ended) is asked
    again, and the copy succeeds on the second answer."""
    area = Pair(local_grid)
    dst = area.dst("bad.dat")
    damage_back(2, how)
    with pytest.raises(TransferError) as err:
        copy(area.put("bad.dat", os.urandom(4096)), dst, verify="both")
    assert err.value.error_class is ErrorClass.CHECKSUM and err.value.retryable
    assert ("different number of bytes" if how else "read back != source") in str(err.value)
    assert not area.disk(dst).exists()
    data = os.urandom(4096)
    damage_back(1, how)
    out = copy(area.put("good.dat", data), area.dst("good.dat"), verify="both")
    assert out.mode == "xrdcl-relay" and out.checksum == adler(data)
    assert area.disk(area.dst("good.dat")).read_bytes() == data
    wait_no_jobs(native)


@pytest.mark.parametrize("how", [0, 1], ids=["flip", "truncate"])
def test_an_upload_whose_read_back_differs_twice_fails_and_leaves_nothing(
        local_grid, damage_back, native, tmp_path, how):
    """The same for file -> root (gx_upload): nothing left, and once is asked again."""
    area = Pair(local_grid)
    src = tmp_path / "up.dat"
    src.write_bytes(os.urandom(3000))
    damage_back(2, how)
    with pytest.raises(TransferError) as err:
        copy(f"file://{src}", area.dst("up.dat"), verify="both")
    assert err.value.error_class is ErrorClass.CHECKSUM and err.value.retryable
    assert not area.disk(area.dst("up.dat")).exists()
    damage_back(1, how)
    out = copy(f"file://{src}", area.dst("up.dat"), verify="both")
    assert out.mode == "xrdcl-posc" and out.checksum == adler(src.read_bytes())
    assert area.disk(area.dst("up.dat")).read_bytes() == src.read_bytes()
    wait_no_jobs(native)


def test_data_done_comes_once_the_read_back_matched_and_never_for_a_bad_copy(
        local_grid, damage_back, native):
    """relay.cpp's ``verified``: ``params.data_done`` is called from inside the native call
    (relaynative.relay itself never calls it) once the bytes read back matched and the
    close is sent, so the campaign's slot is free for that close's round trip; never
    without a read-back, nor for a copy whose read-back differs."""
    area = Pair(local_grid)
    calls: list[str] = []
    data = os.urandom(4096)
    src = area.put("v.dat", data)

    def params(name: str) -> TransferParams:
        return TransferParams(timeout=60, on_data_done=lambda: calls.append(name))

    out = relaynative.relay(src, area.dst("v.dat"), params("checked"), None, read_back=True)
    assert out.stored_adler32 == adler(data) and calls == ["checked"]
    relaynative.relay(src, area.dst("v2.dat"), params("unchecked"), None, read_back=False)
    assert calls == ["checked"]
    damage_back(2, 0)
    with pytest.raises(TransferError):
        relaynative.relay(src, area.dst("bad.dat"), params("bad"), None, read_back=True)
    assert calls == ["checked"] and not area.disk(area.dst("bad.dat")).exists()
    wait_no_jobs(native)


def test_an_unreadable_local_source_touches_nothing(local_grid, tmp_path):
    area = Pair(local_grid)
    src = tmp_path / "locked.dat"
    src.write_bytes(b"x" * 100)
    src.chmod(0)
    if os.access(src, os.R_OK):             # root reads it anyway: make it vanish instead
        src.unlink()
    with pytest.raises(TransferError) as err:
        copy(f"file://{src}", area.dst("locked.dat"), verify="both")
    assert err.value.error_class in (ErrorClass.PERMISSION, ErrorClass.SOURCE_MISSING)
    assert str(src) in str(err.value)
    assert not area.disk(area.dst("locked.dat")).exists()


def test_a_wrong_expected_checksum_is_refused_before_any_write(local_grid):
    area = Pair(local_grid)
    data = os.urandom(100)
    with pytest.raises(TransferError) as err:
        copy(area.put("f.dat", data), area.dst("f.dat"), verify="both", expected_checksum="0x1")
    assert err.value.error_class is ErrorClass.CHECKSUM
    assert f"source adler32 {adler(data)} != expected 00000001" in str(err.value)
    assert not area.disk(area.dst("f.dat")).exists()


def test_tokens_on_a_real_scitokens_server(auth_grid, monkeypatch, tmp_path):
    """ztn login + SciTokens authz on t2-tok1: a token with read and create copies; one
    without create is refused (PERMISSION) and leaves nothing; the token is in no message."""
    for var in ("BEARER_TOKEN", "BEARER_TOKEN_FILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))      # discovery finds nothing
    issuer = tok_mod.load_issuer(Path(auth_grid.extra["issuer"]))
    good = tok_mod.mint(issuer, ["storage.read:/nt", "storage.create:/nt"])
    read_only = tok_mod.mint(issuer, ["storage.read:/nt"])
    data = os.urandom(5000)
    src = localgrid.put_local(auth_grid, "t2-tok1", "nt/s.dat", data)
    dst = auth_grid.endpoints["t2-tok1"].url + "nt/out/d.dat"
    with pytest.raises(TransferError) as err:
        copy(src, dst, verify="both", tokens=TokenPair(src=read_only, dst=read_only))
    assert err.value.error_class in (ErrorClass.PERMISSION, ErrorClass.AUTH), str(err.value)
    assert read_only not in str(err.value)
    assert not auth_grid.local_path(dst).exists()
    out = copy(src, dst, verify="both", tokens=TokenPair(src=good, dst=good))
    assert out.mode == "xrdcl-relay" and out.checksum == adler(data)
    assert auth_grid.local_path(dst).read_bytes() == data


def test_a_cancel_with_the_open_in_flight_returns_at_once_and_leaves_nothing(make_grid,
                                                                           native):
    inv = make_grid([ServerSpec("feeder", "xrootd", "T9"), ServerSpec("frozen", "xrootd", "T9")])
    area = Pair(inv, "feeder", "frozen")
    copy(area.put("warm.dat", b"warm"), area.dst("warm.dat"))    # the channel is up
    server = pidfile_procs(Path(inv.endpoints["frozen"].data_dir).parent / "run")
    assert server
    src, dst = area.put("c.dat", os.urandom(4096)), area.dst("c.dat")
    cancel = threading.Event()
    caught: list[BaseException] = []

    def run() -> None:
        try:
            copy(src, dst, verify="both", cancel=cancel)
        except BaseException as exc:        # noqa: BLE001 - the test looks at it
            caught.append(exc)

    for p in server:
        os.kill(p.pid, signal.SIGSTOP)
    try:
        t = threading.Thread(target=run)
        t.start()
        time.sleep(1.0)                     # the source is read; the open waits on the server
        assert t.is_alive() and jobs_alive(native) == 1
        cancel.set()
        t.join(3)
        assert not t.is_alive(), "the cancelled copy still waits on the frozen server"
    finally:
        for p in server:
            os.kill(p.pid, signal.SIGCONT)
    assert isinstance(caught[0], TransferError)
    assert caught[0].error_class is ErrorClass.CANCELLED
    wait_no_jobs(native)                    # the open answered, then rm and close
    assert not area.disk(dst).exists()
    data = os.urandom(4096)
    out = copy(area.put("c2.dat", data), dst, verify="both")        # the name is free
    assert out.checksum == adler(data) and area.disk(dst).read_bytes() == data


def test_the_switch_turns_it_off(monkeypatch):
    monkeypatch.setenv(relaynative.NATIVE_VAR, "0")
    assert relayabi._load() is None
    monkeypatch.setenv(relaynative.NATIVE_VAR, "1")
    assert relayabi._load() is not None


def test_small_files_take_turns_over_the_channels_asked_for(make_grid, monkeypatch):
    """``GRIDXFER_XRD_SMALL_CHANNELS=3``: the copies to one server go over three login names,
    so three connections from this process, and every file lands."""
    import psutil
    inv = make_grid([ServerSpec("feeder", "xrootd", "T9"), ServerSpec("many", "xrootd", "T9")])
    area = Pair(inv, "feeder", "many")
    monkeypatch.setenv(relaynative.CHANNELS_VAR, "3")
    files = {f"f{i}.dat": os.urandom(1000 + i) for i in range(6)}
    for name, data in files.items():
        copy(area.put(name, data), area.dst(name), verify="both")
    port = int(inv.endpoints["many"].url.split("//")[1].split("/")[0].rsplit(":", 1)[1])
    conns = [c for c in psutil.Process().net_connections("tcp")
             if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED]
    assert len(conns) >= 3, conns
    for name, data in files.items():
        assert area.disk(area.dst(name)).read_bytes() == data

