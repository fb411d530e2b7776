"""Small-file relays in helper processes (movers/xrootd/relaypool.py) on real xrootd servers:
the same copies, outcomes and errors as the relay in this process, no token on a command
line, a helper's death a retried CONNECTION (later relays run here), and helpers that end
with the process that started them, also on kill -9."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
import zlib
from pathlib import Path

import pytest

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers import TransferParams, get_mover
from gridxfer.movers.base import TokenPair
from gridxfer.movers.xrootd import relaynative, relaypool
from gridxfer.testbed import localgrid
from gridxfer.testbed.procs import alive
from gridxfer.testbed import tokens as tok_mod

pytestmark = pytest.mark.integration


def adler(data: bytes) -> str:
    return f"{zlib.adler32(data) & 0xFFFFFFFF:08x}"


@pytest.fixture
def pool(local_grid, monkeypatch):
    """Every relay goes to the helpers (none kept here, servers taken as far). Helpers
    serve the Python relay only (a built native relay runs in the process), so it is off
    here and in the helpers."""
    monkeypatch.setattr(relaynative, "functions", None)
    monkeypatch.setenv(relaynative.NATIVE_VAR, "0")
    monkeypatch.setattr(relaypool, "BUSY", 0)
    monkeypatch.setattr(relaypool, "far", lambda server: True)
    monkeypatch.setenv(relaypool.PROCS_VAR, "2")
    monkeypatch.setattr(relaypool, "_failed", False)
    relaypool.shutdown()
    yield local_grid
    relaypool.shutdown()


def area(grid):
    sub = f"pool-{uuid.uuid4().hex[:8]}/"
    src = lambda name, data: localgrid.put_local(grid, "t0-xrd", sub + name, data)  # noqa: E731
    dst = lambda name: grid.endpoints["t1a-xrd1"].url + sub + "out/" + name       # noqa: E731
    return src, dst


def copy(src: str, dst: str, **kw):
    return get_mover(src, dst).copy(src, dst, params=TransferParams(timeout=60, **kw))


def helpers() -> list[subprocess.Popen]:
    assert relaypool._pool is not None, "no helper was started"
    return [h.proc for h in relaypool._pool.helpers]


def test_many_files_at_once_are_relayed_by_helpers_byte_exact(pool):
    put, dst = area(pool)
    files = {f"f{i:03d}.dat": os.urandom(4096 + i) for i in range(60)}
    srcs = {n: put(n, d) for n, d in files.items()}
    outs: dict[str, object] = {}

    def one(n: str) -> None:
        outs[n] = copy(srcs[n], dst(n), verify="both")

    threads = [threading.Thread(target=one, args=(n,)) for n in files]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(p.poll() is None for p in helpers())
    for n, data in files.items():
        out = outs[n]
        assert out.mode == "xrdcl-relay" and out.checksum == adler(data), n
        assert pool.local_path(dst(n)).read_bytes() == data


def test_errors_come_back_as_the_relay_here_raises_them(pool):
    put, dst = area(pool)
    missing = pool.endpoints["t0-xrd"].url + "pool-none/nope.dat"
    with pytest.raises(TransferError) as err:
        copy(missing, dst("nope.dat"), verify="both")
    assert err.value.error_class is ErrorClass.SOURCE_MISSING
    assert str(err.value).count("source_missing:") == 1
    src = put("f.dat", b"new")
    copy(put("old.dat", b"old"), dst("f.dat"), verify="both")
    with pytest.raises(TransferError) as err:
        copy(src, dst("f.dat"), verify="both")
    assert err.value.error_class is ErrorClass.EXISTS
    assert pool.local_path(dst("f.dat")).read_bytes() == b"old"
    with pytest.raises(TransferError) as err:
        copy(put("g.dat", b"abc"), dst("g.dat"), verify="both", expected_checksum="00000001")
    assert err.value.error_class is ErrorClass.CHECKSUM
    assert not pool.local_path(dst("g.dat")).exists()
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(TransferError) as err:
        copy(put("h.dat", b"abc"), dst("h.dat"), verify="both", cancel=cancel)
    assert err.value.error_class is ErrorClass.CANCELLED


def test_a_source_above_the_relay_limit_takes_the_general_path(pool):
    put, dst = area(pool)
    data = os.urandom((4 << 20) + 1)
    out = copy(put("big.dat", data), dst("big.dat"), verify="both")
    assert out.mode == "xrdcl" and out.checksum == adler(data)
    assert pool.local_path(dst("big.dat")).read_bytes() == data


def test_tokens_reach_the_helpers_over_the_pipe_never_argv_or_environment(
        auth_grid, monkeypatch, tmp_path):
    monkeypatch.setattr(relaynative, "functions", None)
    monkeypatch.setenv(relaynative.NATIVE_VAR, "0")
    monkeypatch.setattr(relaypool, "BUSY", 0)
    monkeypatch.setattr(relaypool, "far", lambda server: True)
    for var in ("BEARER_TOKEN", "BEARER_TOKEN_FILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))      # discovery finds nothing
    relaypool.shutdown()
    try:
        issuer = tok_mod.load_issuer(Path(auth_grid.extra["issuer"]))
        secret = tok_mod.mint(issuer, ["storage.read:/pt", "storage.create:/pt"])
        data = os.urandom(5000)
        src = localgrid.put_local(auth_grid, "t2-tok1", "pt/s.dat", data)
        dst = auth_grid.endpoints["t2-tok1"].url + "pt/out/d.dat"
        params = TransferParams(timeout=60, verify="both",
                                tokens=TokenPair(src=secret, dst=secret))
        out = get_mover(src, dst).copy(src, dst, params=params)
        assert out.mode == "xrdcl-relay" and out.checksum == adler(data)
        assert auth_grid.local_path(dst).read_bytes() == data
        for proc in helpers():
            for what in ("cmdline", "environ"):
                with open(f"/proc/{proc.pid}/{what}", "rb") as f:
                    assert secret.encode() not in f.read(), what
            with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            assert argv[1:3] == [b"-m", b"gridxfer.movers.xrootd.relayhelper"]
    finally:
        relaypool.shutdown()


@pytest.fixture
def silent_server():
    """A TCP server that accepts and never answers: a relay from it waits."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    yield f"root://127.0.0.1:{srv.getsockname()[1]}//data/"
    srv.close()


def test_a_helper_that_dies_fails_its_copies_as_connection_then_relays_run_here(
        pool, silent_server, monkeypatch):
    put, dst = area(pool)
    src = put("ok.dat", b"fine")
    copy(src, dst("first.dat"), verify="both")            # the helpers are up
    t, caught = hang_in_a_helper(silent_server + "x.dat", dst("x.dat"))
    for h in relaypool._pool.helpers:
        h.proc.kill()
    t.join(10)
    assert not t.is_alive()
    assert isinstance(caught[0], TransferError)
    assert caught[0].error_class is ErrorClass.CONNECTION and caught[0].retryable
    deadline = time.monotonic() + 10        # each helper's reader sees its pipe end
    while relaypool._pool.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not relaypool._pool.alive()
    out = copy(src, dst("after.dat"), verify="both")     # in this process now
    assert out.mode == "xrdcl-relay"
    assert pool.local_path(dst("after.dat")).read_bytes() == b"fine"


def test_helpers_end_when_their_process_is_killed(pool, silent_server, tmp_path):
    """kill -9 of the process that started them: their stdin ends, and so do they."""
    put, dst = area(pool)
    src = put("k.dat", b"k")
    script = tmp_path / "starter.py"
    script.write_text(textwrap.dedent(f"""
        import threading, time
        from gridxfer.movers import TransferParams, get_mover
        from gridxfer.movers.xrootd import relaypool
        relaypool.BUSY = 0
        relaypool.far = lambda server: True
        m = get_mover({src!r}, {dst("k.dat")!r})
        m.copy({src!r}, {dst("k.dat")!r}, params=TransferParams(timeout=60))
        print(" ".join(str(h.proc.pid) for h in relaypool._pool.helpers), flush=True)
        threading.Thread(target=lambda: m.copy({silent_server + "y.dat"!r}, {dst("y.dat")!r},
                         params=TransferParams(timeout=60)), daemon=True).start()
        time.sleep(60)
    """))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, env=env)
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 2 and all(os.path.exists(f"/proc/{p}") for p in pids)
        time.sleep(0.5)                     # the hung copy is in a helper
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 10
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(alive(p) for p in pids)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()



def test_helpers_that_cannot_start_leave_every_relay_here(pool, monkeypatch, caplog):
    monkeypatch.setattr(relaypool.sys, "executable", "/nonexistent/python3")
    put, dst = area(pool)
    for i in range(3):
        out = copy(put(f"n{i}.dat", b"data"), dst(f"n{i}.dat"), verify="both")
        assert out.mode == "xrdcl-relay"
        assert pool.local_path(dst(f"n{i}.dat")).read_bytes() == b"data"
    assert relaypool._pool is None and relaypool._failed
    said = [r.getMessage() for r in caplog.records if "could not start" in r.getMessage()]
    assert len(said) == 1, said


def test_closing_the_helpers_ends_the_copies_waiting_on_them(pool, silent_server, caplog):
    """A deliberate close (shutdown) answers the relays in flight at once, as CONNECTION
    (retried), without the warning of a helper that died."""
    put, dst = area(pool)
    copy(put("up.dat", b"up"), dst("up.dat"), verify="both")      # the helpers are up
    t, caught = hang_in_a_helper(silent_server + "z.dat", dst("z.dat"))
    relaypool.shutdown()
    t.join(15)
    assert not t.is_alive(), "a copy still waits on a closed helper"
    assert isinstance(caught[0], TransferError)
    assert caught[0].error_class is ErrorClass.CONNECTION
    assert not [r for r in caplog.records if "helper process ended" in r.getMessage()]


def hang_in_a_helper(src: str, dst: str) -> tuple[threading.Thread, list[BaseException]]:
    """A copy from a server that never answers, in a thread, once a helper holds it; the
    list gets what the copy raises."""
    caught: list[BaseException] = []

    def hung() -> None:
        try:
            copy(src, dst, verify="both")
        except BaseException as exc:        # noqa: BLE001 - the test looks at it
            caught.append(exc)

    t = threading.Thread(target=hung)
    t.start()
    deadline = time.monotonic() + 10
    while not any(h.calls for h in relaypool._pool.helpers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert any(h.calls for h in relaypool._pool.helpers), "the copy never reached a helper"
    return t, caught
