"""gridxfer's own GridFTP client (movers/gridftp/control.py, movers/gridftp/client.py) against
the real GSI globus-gridftp-server of the session's local grid: uploads, metadata, session reuse and
recovery, cancel, and the fall back to gfal2 for a server it cannot authenticate to."""
from __future__ import annotations

import os
import socket
import threading
import zlib
from pathlib import Path

import pytest

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.gridftp import control as ftpcontrol
from gridxfer.movers.gridftp import data as ftpdata
from gridxfer.movers.gridftp import client as gridftp
from gridxfer.movers.gridftp import replies
from gridxfer.movers.base import TransferParams
from gridxfer.movers.gridftp.control import GsiControl, NativeUnavailable
from gridxfer.movers.registry import get_mover

pytestmark = pytest.mark.usefixtures("local_grid")


@pytest.fixture
def ep(local_grid):
    return local_grid.endpoints["t0-gsiftp"]


@pytest.fixture
def area(ep, request):
    """A fresh directory name under the endpoint (created by the code under test)."""
    return f"{ep.url}native-{request.node.name.replace('[', '-').rstrip(']')}/"


@pytest.fixture(autouse=True)
def _fresh_sessions():
    gridftp._local.__dict__.clear()
    with gridftp._REFUSED_LOCK:
        gridftp._REFUSED.clear()
    yield
    for session in getattr(gridftp._local, "sessions", {}).values():
        session.close()
    for data, _ in ftpdata.prepared().values():
        data.close()
    ftpdata.prepared().clear()
    gridftp._local.__dict__.clear()
    with gridftp._REFUSED_LOCK:
        gridftp._REFUSED.clear()


def _file(tmp_path: Path, size: int, name: str = "src.dat") -> Path:
    path = tmp_path / name
    path.write_bytes(os.urandom(size))
    return path


def _on_disk(ep, url: str) -> Path:
    return Path(ep.data_dir) / url[len(ep.url):]


def test_session_authenticates_without_delegating_a_proxy(ep):
    """The GSI handshake ends with the delegation flag '0': the server logs the user in
    (grid-mapfile) without asking for a proxy to sign."""
    host, port = ep.url.split("//")[1].split("/")[0].split(":")
    session = GsiControl(host, int(port))
    try:
        reply = session.command("PWD")
        assert reply.code == 257
        assert session.command("MLST /", check=False).code in (250, 550)
    finally:
        session.close()


def test_verified_copy_through_native_client(ep, area, tmp_path):
    """file -> gsiftp with one stream: the bytes, the temp name, the checksum and the rename
    all go over this thread's one native session; what lands is the source, nothing else."""
    src = _file(tmp_path, 3 * 1024 * 1024 + 7)
    mover = get_mover(f"file://{src}", area + "a/b/f.dat")
    out = mover.copy(f"file://{src}", area + "a/b/f.dat",
                     params=TransferParams(streams=1, timeout=120))
    assert out.mode == "gridftp-native" and out.streams_used == 1
    assert out.checksum == f"{zlib.adler32(src.read_bytes()):08x}"
    landed = _on_disk(ep, area + "a/b")
    assert sorted(os.listdir(landed)) == ["f.dat"]
    assert (landed / "f.dat").read_bytes() == src.read_bytes()
    assert len(gridftp._local.sessions) == 1


def test_metadata_ops(ep, area, tmp_path):
    native = gridftp.NativeGridFTP()
    native.mkdir(area + "x/y")
    assert native.stat(area + "x/y").is_dir
    native.mkdir(area + "x/y")                       # an existing directory is fine
    src = _file(tmp_path, 100_000)
    assert native.upload(f"file://{src}", area + "x/y/t.tmp", TransferParams()) == 100_000
    entry = native.stat(area + "x/y/t.tmp")
    assert (entry.size, entry.is_dir) == (100_000, False)
    assert native.checksum(area + "x/y/t.tmp") == f"{zlib.adler32(src.read_bytes()):08x}"
    native.rename(area + "x/y/t.tmp", area + "x/y/t")
    with pytest.raises(TransferError) as err:
        native.stat(area + "x/y/t.tmp")
    assert err.value.error_class is ErrorClass.SOURCE_MISSING
    native.unlink(area + "x/y/t")
    assert os.listdir(_on_disk(ep, area + "x/y")) == []


def test_session_closed_by_server_is_replaced(ep, area, tmp_path):
    """A kept session the server dropped (idle timeout, restart) costs one reconnect, not a
    failed transfer."""
    native = gridftp.NativeGridFTP()
    native.mkdir(area)
    first = gridftp._local.sessions[ep.url.split("//")[1].split("/")[0]]
    first.sock.shutdown(2)                              # as if the server hung up
    native.mkdir(area + "again")
    assert native.stat(area + "again").is_dir
    first.last_used -= 3600                             # and an old one is probed first
    first_after = next(iter(gridftp._local.sessions.values()))
    first_after.sock.shutdown(2)
    first_after.last_used -= 3600
    src = _file(tmp_path, 50_000)
    assert native.upload(f"file://{src}", area + "u.dat", TransferParams()) == 50_000
    assert next(iter(gridftp._local.sessions.values())) is not first_after


def test_cancel_during_upload_leaves_nothing(ep, area, tmp_path):
    src = _file(tmp_path, 40 << 20)
    cancel = threading.Event()

    def progress(done, total):
        cancel.set()                                     # after the first chunk

    mover = get_mover(f"file://{src}", area + "c.dat")
    with pytest.raises(TransferError) as err:
        mover.copy(f"file://{src}", area + "c.dat",
                   params=TransferParams(streams=1, timeout=120, cancel=cancel),
                   progress=progress)
    assert err.value.error_class is ErrorClass.CANCELLED
    where = _on_disk(ep, area)
    assert not where.exists() or os.listdir(where) == []


def test_server_it_cannot_authenticate_to_goes_to_gfal2(ep, area, tmp_path, monkeypatch):
    """A server this client cannot use (here: every TLS set-up refused) is copied to with
    gfal2 instead, and remembered so later files do not try again."""
    calls = []

    def refuse():
        calls.append(1)
        raise NativeUnavailable("test: no TLS context")

    monkeypatch.setattr(ftpcontrol, "_tls_context", refuse)
    src = _file(tmp_path, 200_000)
    mover = get_mover(f"file://{src}", area + "g0.dat")
    for i in range(2):
        out = mover.copy(f"file://{src}", area + f"g{i}.dat",
                         params=TransferParams(streams=1, timeout=120))
        assert out.mode == "gfal-streamed"
        assert _on_disk(ep, area + f"g{i}.dat").read_bytes() == src.read_bytes()
    assert len(calls) == 1
    assert "no TLS context" in (gridftp.refused(area) or "")


def test_switch_off_with_environment(area, tmp_path, monkeypatch):
    monkeypatch.setenv("GRIDXFER_GRIDFTP", "gfal2")
    src = _file(tmp_path, 10_000)
    out = get_mover(f"file://{src}", area + "e.dat").copy(
        f"file://{src}", area + "e.dat", params=TransferParams(streams=1, timeout=120))
    assert out.mode == "gfal-streamed"


def test_missing_source_is_source_missing(area):
    with pytest.raises(TransferError) as err:
        get_mover("file:///nonexistent/x.dat", area + "m.dat").copy(
            "file:///nonexistent/x.dat", area + "m.dat", params=TransferParams(streams=1))
    assert err.value.error_class is ErrorClass.SOURCE_MISSING


def test_reply_parsing():
    reply = ftpcontrol._parse(["250-status of /d", " Type=dir;Size=40;Perm=el; /d", "250 End."])
    assert reply.code == 250 and reply.ok
    assert replies.facts(reply.text) == {"type": "dir", "size": "40", "perm": "el"}
    assert not ftpcontrol._parse(["550-GlobusError: v=1 c=PATH_NOT_FOUND", "550 End."]).ok


def test_release_early_signals_before_the_server_confirms(area, tmp_path):
    """With release_early the slot is handed back once the last byte is in the socket:
    before the server's 226 (the upload's return), exactly once."""
    src = _file(tmp_path, 5 << 20)
    returned, calls = [], []
    params = TransferParams(on_data_done=lambda: calls.append(bool(returned)))
    native = gridftp.NativeGridFTP()
    native.mkdir(area)
    native.upload(f"file://{src}", area + "r.dat", params, release_early=True)
    returned.append(True)
    assert calls == [False]
    native.upload(f"file://{src}", area + "r2.dat", params)
    assert calls == [False]                      # not asked: not signalled


def test_tls12_server_takes_the_step_by_step_handshake(ep, area, tmp_path, monkeypatch):
    """Servers that stop at TLS 1.2 get one ADAT round trip per handshake flight (the
    TLS 1.3 login sends the last flight, the flag and the login together)."""
    import ssl
    make = ftpcontrol._tls_context

    def tls12():
        ctx = make()
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        return ctx

    monkeypatch.setattr(ftpcontrol, "_tls_context", tls12)
    host, port = ep.url.split("//")[1].split("/")[0].split(":")
    session = GsiControl(host, int(port))
    try:
        assert session._tls.version() == "TLSv1.2"
        assert session.command("PWD").code == 257
    finally:
        session.close()
    src = _file(tmp_path, 300_000)
    out = get_mover(f"file://{src}", area + "t12.dat").copy(
        f"file://{src}", area + "t12.dat", params=TransferParams(streams=1, timeout=120))
    assert out.mode == "gridftp-native"
    assert _on_disk(ep, area + "t12.dat").read_bytes() == src.read_bytes()


def test_refusal_is_forgotten_after_a_while(area, monkeypatch):
    """A refused server gets this client back after RETRY_NATIVE s (a renewed proxy)."""
    with gridftp._REFUSED_LOCK:
        gridftp._REFUSED[area.split("//")[1].split("/")[0]] = (gridftp.time.monotonic() + 600, "x")
    assert not gridftp.NativeGridFTP.usable(area)
    now = gridftp.time.monotonic()
    monkeypatch.setattr(gridftp.time, "monotonic", lambda: now + 601)
    assert gridftp.NativeGridFTP.usable(area) and gridftp.refused(area) is None


def test_refused_store_reports_the_servers_reply_without_stalling(ep, area, tmp_path):
    """The first bytes go out before the server's 150 (ftpdata.send_ahead): a STOR the server
    refuses (a directory its user cannot write) still ends at once, with the server's
    reply, and the next upload on the session works. (Sending on after a refusal, with
    the reply unread, stalls here for DATA_STALL s.)"""
    import time
    native = gridftp.NativeGridFTP()
    native.mkdir(area)                          # the server's own directory
    locked = _on_disk(ep, area) / "locked"
    locked.mkdir()
    os.chmod(locked, 0o555)                     # root's; the server runs unprivileged
    src = _file(tmp_path, 64 << 20)
    t = time.monotonic()
    with pytest.raises(TransferError) as err:
        native.upload(f"file://{src}", area + "locked/x.dat",
                      TransferParams(streams=1, timeout=120))
    assert time.monotonic() - t < 60            # the refusal, not DATA_STALL (120 s)
    assert err.value.error_class is ErrorClass.PERMISSION, err.value
    # the server's own words: its reply code and, at the end of its chain, the reason (a
    # long message loses its middle: classify.one_line keeps the start and the reason)
    assert "STOR: 500" in str(err.value) and "Permission denied" in str(err.value), err.value
    assert native.upload(f"file://{src}", area + "ok.dat",
                         TransferParams(streams=1, timeout=120)) == 64 << 20
    assert (_on_disk(ep, area) / "ok.dat").read_bytes() == src.read_bytes()


def test_next_upload_uses_the_data_connection_prepared_after_the_last(ep, area, tmp_path,
                                                                       monkeypatch):
    """A new session sends PASV with its login and starts connecting, and after an upload
    in a campaign (release_early) it opens the next data connection at once: no STOR waits
    for PASV. A prepared connection that the server closed, or that is older than
    READY_MAX_AGE, is not used: PASV as usual. Every file arrives whole."""
    native = gridftp.NativeGridFTP()
    native.mkdir(area)
    sent: list[list[str]] = []
    real_send = ftpcontrol.GsiControl.send
    monkeypatch.setattr(ftpcontrol.GsiControl, "send",
                        lambda self,
                        commands: sent.append(list(commands)) or real_send(self, commands))

    def upload(name: str) -> list[str]:
        src = _file(tmp_path, 3 << 20, name)
        sent.clear()
        native.upload(f"file://{src}", area + name, TransferParams(), release_early=True)
        assert (_on_disk(ep, area) / name).read_bytes() == src.read_bytes()
        return next(c for c in sent if any(x.startswith("STOR") for x in c))

    session = next(iter(gridftp._local.sessions.values()))
    assert [r.code for r in session.after_login] == [227]
    assert upload("a.dat") == [f"STOR {gridftp._path(area)}a.dat"]     # opened at login
    assert len(ftpdata.prepared()) == 1
    assert upload("b.dat") == [f"STOR {gridftp._path(area)}b.dat"]
    data, _ = next(iter(ftpdata.prepared().values()))
    data.shutdown(socket.SHUT_RD)                      # reads as closed by the server
    assert upload("c.dat")[0] == "PASV"
    monkeypatch.setattr(ftpdata, "READY_MAX_AGE", 0.0)
    assert upload("d.dat")[0] == "PASV"


def test_a_prepared_connection_that_was_refused_is_not_used():
    with socket.socket() as probe:                     # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ftpdata.keep("gone:1", ftpdata.connect_later(("127.0.0.1", port)))
    assert ftpdata.take("gone:1") is None
    assert "gone:1" not in ftpdata.prepared()


def _record_sends(monkeypatch) -> list[list[str]]:
    sent: list[list[str]] = []
    real_send = ftpcontrol.GsiControl.send
    monkeypatch.setattr(ftpcontrol.GsiControl, "send",
                        lambda self,
                        commands: sent.append(list(commands)) or real_send(self, commands))
    return sent


def test_the_destination_check_rides_in_the_stor_flight(ep, area, tmp_path, monkeypatch):
    """Overwrite off: the MLST of the final name goes out with the STOR of the temporary
    name (no round trip of its own before the data), and the copy lands whole."""
    mover = get_mover(f"file://{tmp_path}/x", area + "f.dat")
    mover.copy(f"file://{_file(tmp_path, 1000, 'warm.dat')}", area + "warm.dat",
               params=TransferParams(streams=1, timeout=120))     # directory and session made
    sent = _record_sends(monkeypatch)
    src = _file(tmp_path, 5 << 20)
    mover.copy(f"file://{src}", area + "f.dat", params=TransferParams(streams=1, timeout=120))
    final = f"MLST {gridftp._path(area)}f.dat"
    flight = next(c for c in sent if any(x.startswith("STOR") for x in c))
    assert flight[0] == final and flight[-1].startswith("STOR")
    assert [final] not in sent                      # not asked on its own before
    assert (_on_disk(ep, area) / "f.dat").read_bytes() == src.read_bytes()


@pytest.mark.parametrize("prepared", [True, False])
def test_an_existing_destination_is_refused_and_nothing_is_left(ep, area, tmp_path, prepared):
    """Overwrite off and the final name exists: EXISTS, the existing file untouched, and the
    partial temporary file the STOR began is gone (with a prepared data connection, and
    with PASV sent in the same flight)."""
    mover = get_mover(f"file://{tmp_path}/x", area + "f.dat")
    first = _file(tmp_path, 1 << 20, "first.dat")
    mover.copy(f"file://{first}", area + "f.dat", params=TransferParams(streams=1, timeout=120))
    if not prepared:
        for netloc in list(ftpdata.prepared()):
            ftpdata.discard(netloc)
    assert bool(ftpdata.prepared()) is prepared
    with pytest.raises(TransferError) as err:
        mover.copy(f"file://{_file(tmp_path, 6 << 20)}", area + "f.dat",
                   params=TransferParams(streams=1, timeout=120))
    assert err.value.error_class is ErrorClass.EXISTS
    assert os.listdir(_on_disk(ep, area)) == ["f.dat"]
    assert (_on_disk(ep, area) / "f.dat").read_bytes() == first.read_bytes()
