"""davput's answers that the real XrdHttp cannot be made to give on demand: a server that
accepts the connection and never answers (a stall is TIMEOUT, not a fallback to gfal2,
which would wait as long again), no server at all (None: gfal2 reports it), a cancelled
copy (nothing sent). The copies themselves: tests/integration/test_davs_movers.py."""
from __future__ import annotations

import socket
import threading
import zlib

import pytest

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import CancelFlag, Entry, TransferParams
from gridxfer.movers.gfal import davput


@pytest.fixture
def silent():
    """A plain-HTTP listener on loopback that reads and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield f"dav://127.0.0.1:{server.getsockname()[1]}/d/"
    stop.set()
    t.join()
    for s in held:
        s.close()
    server.close()


def test_a_put_with_no_answer_is_a_timeout(silent):
    with pytest.raises(TransferError) as err:
        davput.put(silent + "f.dat", b"x" * 4096, None, 0.5)
    assert err.value.error_class is ErrorClass.TIMEOUT and err.value.retryable


def test_a_get_with_no_answer_is_a_timeout(silent):
    with pytest.raises(TransferError) as err:
        davput.read(silent + "f.dat", None, 4096, 0.5)
    assert err.value.error_class is ErrorClass.TIMEOUT


def test_no_server_is_left_to_gfal2():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]           # closed again: nothing listens there
    assert davput.put(f"dav://127.0.0.1:{port}/f", b"x", None, 5) is False
    assert davput.read(f"dav://127.0.0.1:{port}/f", None, 1, 5) is None


def test_a_cancelled_copy_sends_nothing(tmp_path, silent):
    flag = CancelFlag()
    flag.set()
    with pytest.raises(TransferError) as err:
        davput.copy(f"file://{tmp_path}/none", silent + "f", TransferParams(cancel=flag), 1,
                    None, stall=0.5)
    assert err.value.error_class is ErrorClass.CANCELLED


def test_a_local_source_is_read_whole_and_a_missing_one_left_to_gfal2(tmp_path):
    (tmp_path / "a").write_bytes(b"abc")
    assert davput.read(f"file://{tmp_path}/a", None, 3, 1) == b"abc"
    assert davput.read(f"file://{tmp_path}/missing", None, 3, 1) is None


def test_fetched_reads_once_and_sums_the_bytes(monkeypatch):
    """The copy and the source's checksum share one GET; where it is not answered the
    checksum is the inner ops' (gfal2's)."""
    reads: list[str] = []
    monkeypatch.setattr(davput, "read", lambda url, *a: reads.append(url) or b"hello")

    class Inner:
        def checksum(self, url, algorithm="adler32"):
            return "inner"

    entry = Entry("davs://se/f", 5)
    got = davput.Fetched(Inner(), entry, None)
    assert got.checksum("davs://se/f") == f"{zlib.adler32(b'hello'):08x}"
    assert got.data() == b"hello" and reads == ["davs://se/f"]
    assert got.stat("davs://se/f") is entry
    monkeypatch.setattr(davput, "read", lambda *a: None)
    assert davput.Fetched(Inner(), entry, None).checksum("davs://se/f") == "inner"
