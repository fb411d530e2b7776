"""The davs/https movers (movers/gfal/davs.py, httptpc.py) on the testbed's real XrdHttp
5.5.3 servers over TLS: anonymous ones and two with SciTokens authorisation.

Every copy is verified with the server's own adler32 (gfal2's checksum: XrdHttp's answer to
``Want-Digest``), lands under its final name only by ``MOVE`` from a temporary name, and a
failure leaves nothing. Tokens reach gfal2 through its credential API, and the gfal2 child
of an HTTP-TPC on its stdin: never in a process's arguments or environment.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import zlib
from dataclasses import replace
from pathlib import Path

import pytest

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers import TransferParams, get_mover, mover_for, names
from gridxfer.movers.base import TokenPair
from gridxfer.testbed import localgrid
from gridxfer.testbed import tokens as tok_mod
from gridxfer.testbed.localgrid import AUTH_SERVERS, LocalGridSpec, ServerSpec

pytestmark = pytest.mark.integration

SERVERS = (ServerSpec("h-xrd", "xrootd", "T0"),
           ServerSpec("h-slow", "xrootd", "T0", throttle=2e6), *AUTH_SERVERS)
DATA = b"\0" * 1000 + os.urandom(2_000_000)
SUM = f"{zlib.adler32(DATA) & 0xFFFFFFFF:08x}"


@pytest.fixture(scope="module")
def grid(tmp_path_factory, grid_ca):
    home = tmp_path_factory.mktemp("davs-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GRIDXFER_HOME", str(home))
        for var in ("BEARER_TOKEN", "BEARER_TOKEN_FILE"):
            mp.delenv(var, raising=False)
        inv = localgrid.up(LocalGridSpec(servers=SERVERS, gsi=grid_ca, owner_pid=os.getpid()))
        try:
            yield inv
        finally:
            localgrid.down()


@pytest.fixture(scope="module")
def mint(grid):
    issuer = tok_mod.load_issuer(Path(grid.extra["issuer"]))
    return lambda *scopes: tok_mod.mint(issuer, list(scopes), lifetime=600)


@pytest.fixture
def payload(tmp_path) -> str:
    path = tmp_path / "payload.dat"
    path.write_bytes(DATA)
    return f"file://{path}"


def params(**kw) -> TransferParams:
    return TransferParams(timeout=kw.pop("timeout", 120), **kw)


def disk(grid, url: str) -> Path:
    path = grid.local_path(url)
    assert path is not None, url
    return path


def leftovers(grid, url: str) -> list[str]:
    directory = disk(grid, url).parent
    return sorted(os.listdir(directory)) if directory.exists() else []


@pytest.mark.parametrize("scheme", ["davs", "https"])
def test_upload_and_download_with_each_sides_token(grid, mint, payload, tmp_path, scheme):
    """storage.create may PUT a new temporary name and MOVE it into place (measured)."""
    dst = grid.resolve(f"t2-davs1/mv/{scheme}/f.dat").replace("davs://", f"{scheme}://", 1)
    up = TokenPair(dst=mint("storage.read:/mv", "storage.create:/mv"))
    mover = get_mover(payload, dst)
    assert mover.name == "davs"
    out = mover.copy(payload, dst, params=params(tokens=up))
    assert (out.mode, out.checksum, out.bytes) == ("davs-put", SUM, len(DATA))  # davput
    assert disk(grid, dst).read_bytes() == DATA
    assert leftovers(grid, dst) == ["f.dat"]            # the temporary name was moved
    back = f"file://{tmp_path}/back/f.dat"
    down = TokenPair(src=mint("storage.read:/mv"))
    out = get_mover(dst, back).copy(dst, back, params=params(tokens=down))
    assert out.checksum == SUM and Path(back[7:]).read_bytes() == DATA


@pytest.mark.parametrize("scopes", [("storage.read:/",), ()], ids=["read-only", "no-token"])
def test_a_refused_write_is_auth_and_leaves_nothing(grid, mint, payload, scopes):
    dst = grid.resolve("t2-davs1/refused/f.dat")
    tokens = TokenPair(dst=mint(*scopes)) if scopes else None
    with pytest.raises(TransferError) as err:
        get_mover(payload, dst).copy(payload, dst, params=params(tokens=tokens))
    assert err.value.error_class is ErrorClass.AUTH and not err.value.retryable, err.value
    assert "eyJ" not in str(err.value)
    assert not disk(grid, dst).exists() and leftovers(grid, dst) == []


def _children_without(secret: str) -> None:
    """No child process of this one has ``secret`` in its arguments or environment."""
    import psutil
    for child in psutil.Process().children(recursive=True):
        try:
            env = child.environ()
            text = " ".join(child.cmdline()) + " ".join(f"{k}={v}" for k, v in env.items())
        except psutil.Error:
            continue
        assert secret not in text, child


@pytest.mark.parametrize("mode", ["pull", "push"])
def test_tpc_with_a_token_per_side(grid, mint, mode, monkeypatch):
    """Each side's own token: the source's read, the destination's create + modify."""
    monkeypatch.setenv("GRIDXFER_HTTP_TPC_MODE", mode)
    src = grid.resolve(f"t2-davs1/tpc/{mode}.src")
    localgrid.put_local(grid, "t2-tok1", f"tpc/{mode}.src", DATA)
    dst = grid.resolve(f"t2-davs2/tpc/{mode}/f.dst")
    tokens = TokenPair(src=mint("storage.read:/tpc"),
                       dst=mint("storage.read:/tpc", "storage.modify:/tpc"))
    mover = get_mover(src, dst, third_party=True)
    seen: list[int] = []
    out = mover.copy(src, dst, params=params(tokens=tokens, third_party=True),
                     progress=lambda done, total: seen.append(done))
    assert (out.mode, out.checksum) == (f"http-tpc-{mode}", SUM)
    assert disk(grid, dst).read_bytes() == DATA and leftovers(grid, dst) == ["f.dst"]
    for token in (tokens.src, tokens.dst):
        assert token is not None
        _children_without(token.rsplit(".", 1)[1])     # the gfal2 child got them on stdin


def test_a_refused_pull_falls_back_to_push_for_that_pair(grid, mint, monkeypatch):
    """XrdHttp 5.5.3 refuses to pull into a missing directory; a push (PUT, mkpath) makes
    it. The pair is then pushed straight away."""
    from gridxfer.movers.gfal import httptpc
    from gridxfer.movers.gfal.davs import HttpOps
    monkeypatch.delenv("GRIDXFER_HTTP_TPC_MODE", raising=False)
    monkeypatch.setattr(httptpc, "_push_only", set())
    src = localgrid.put_local(grid, "h-xrd", "fb/f.src", DATA).replace(
        grid.endpoints["h-xrd"].url, grid.endpoints["h-xrd"].davs_url)
    dst = grid.resolve("t2-davs2/fb/missing/dir/f.dst")
    tokens = TokenPair(dst=mint("storage.read:/fb", "storage.modify:/fb"))
    assert httptpc.modes(src, dst) == [httptpc.PULL, httptpc.PUSH]
    used = httptpc.copy(src, dst, params(tokens=tokens, third_party=True), None,
                        HttpOps(tokens.dst))
    assert used == (1, "http-tpc-push")
    assert disk(grid, dst).read_bytes() == DATA
    assert httptpc.modes(src, dst) == [httptpc.PUSH]


def test_a_stalled_tpc_is_cancelled_as_a_retryable_timeout(grid, monkeypatch):
    """The source stops sending (SIGSTOP): the markers stop moving, and after
    GRIDXFER_HTTP_STALL_TIMEOUT the copy is killed, fails as TIMEOUT (retried by the
    scheduler) and leaves nothing at the destination."""
    monkeypatch.setenv("GRIDXFER_HTTP_STALL_TIMEOUT", "8")
    monkeypatch.setenv("GRIDXFER_HTTP_TPC_MODE", "pull")
    localgrid.put_local(grid, "h-slow", "stall/big", os.urandom(1 << 20) * 40)
    src = grid.endpoints["h-slow"].davs_url + "stall/big"
    dst = grid.endpoints["h-xrd"].davs_url + "stall/out/big"
    moved = threading.Event()
    caught: list[BaseException] = []

    def run() -> None:
        try:
            get_mover(src, dst, third_party=True).copy(
                src, dst, params=params(third_party=True, checksum=None),
                progress=lambda done, total: done > 0 and moved.set())
        except BaseException as exc:     # noqa: BLE001 - checked below
            caught.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    server = grid.endpoints["h-slow"].pid
    try:
        assert moved.wait(60), "no performance marker with bytes"
        os.kill(server, signal.SIGSTOP)
        worker.join(120)
    finally:
        os.kill(server, signal.SIGCONT)
    assert not worker.is_alive()
    assert len(caught) == 1 and isinstance(caught[0], TransferError), caught
    assert caught[0].error_class is ErrorClass.TIMEOUT and caught[0].retryable
    assert "stalled" in str(caught[0])
    deadline = time.monotonic() + 30
    while leftovers(grid, dst) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert leftovers(grid, dst) == []


@pytest.mark.parametrize("method", ["PUT", "MOVE"])
def test_a_request_left_unanswered_is_a_timeout_after_the_stall_timeout(grid, monkeypatch,
                                                                        method):
    """A small file's PUT (davput) and its MOVE (davmove), sent on a kept connection to a
    server that stops answering (SIGSTOP), are a retryable TIMEOUT naming the request after
    GRIDXFER_HTTP_STALL_TIMEOUT. A MOVE used to wait a fixed 120 s: in CI (session 39)
    XrdHttp left one of these unanswered that long."""
    from gridxfer.movers.gfal import davmove, davput, davsession
    monkeypatch.setenv("GRIDXFER_HTTP_STALL_TIMEOUT", "2")
    base = grid.endpoints["h-slow"].davs_url + f"hang-{method}/"
    localgrid.put_local(grid, "h-slow", f"hang-{method}/a", b"a")
    assert davsession.request("HEAD", base + "a", {}, timeout=(30, 30)).status == 200
    if method == "MOVE":        # the PUT's answer keeps the connection, as between two files
        assert davput.put(base + "t", b"t" * 4096, None, 30)
    server = grid.endpoints["h-slow"].pid
    os.kill(server, signal.SIGSTOP)
    try:
        with pytest.raises(TransferError) as err:
            if method == "PUT":
                davput.put(base + "t", b"t" * 4096, None, davput.stall_timeout())
            else:
                davmove.move(base + "t", base + "f")
    finally:
        os.kill(server, signal.SIGCONT)
    assert err.value.error_class is ErrorClass.TIMEOUT and err.value.retryable
    assert f"{method} had no answer in 2 s" in str(err.value)


HOSTILE = ["sp ace.dat", "hash#tag.dat", "pct%41.dat", "plus+sign.dat",
           "amp&semi;.dat", "quote'\".dat", "ünï.dat", "colon:x.dat"]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_are_quoted_for_http(grid, payload, tmp_path, name):
    base = grid.endpoints["h-xrd"].davs_url + "hostile/"
    url = names.join_url(base, name)
    out = get_mover(payload, url).copy(payload, url, params=params(overwrite=True))
    assert out.checksum == SUM
    on_disk = Path(grid.endpoints["h-xrd"].data_dir) / "hostile" / name
    assert on_disk.read_bytes() == DATA                       # the raw name, decoded once
    assert not [n for n in os.listdir(on_disk.parent) if n.startswith(f".{name}.")]
    listed = {names.listed_name(e.url) for e in mover_for(base).listdir(base)}
    assert name in listed
    back = f"file://{tmp_path}/back"
    assert get_mover(url, back).copy(url, back, params=params()).checksum == SUM


def test_a_hostile_upload_is_never_visible_under_its_final_name(grid, tmp_path):
    """Issue 20: every HOSTILE name goes through a temporary name and ``MOVE``
    (davmove.py: the decoded Destination), so its final name, whenever it is seen during
    the uploads, holds the whole file. The throttled server (2 MB/s for all of them)
    keeps the uploads busy for seconds. Before: written in place, seen growing."""
    data = os.urandom(3 << 20)
    src = tmp_path / "big.dat"
    src.write_bytes(data)
    base = grid.endpoints["h-slow"].davs_url + "moved/"
    where = Path(grid.endpoints["h-slow"].data_dir) / "moved"
    caught: list[BaseException] = []

    def upload(name: str) -> None:
        url = names.join_url(base, name)
        try:
            get_mover(f"file://{src}", url).copy(f"file://{src}", url,
                                                 params=params(overwrite=True))
        except BaseException as exc:     # noqa: BLE001 - checked below
            caught.append(exc)

    workers = [threading.Thread(target=upload, args=(n,)) for n in HOSTILE]
    for w in workers:
        w.start()
    seen: dict[str, set[int]] = {n: set() for n in HOSTILE}
    while any(w.is_alive() for w in workers):
        for name in HOSTILE:
            with contextlib.suppress(FileNotFoundError):
                seen[name].add((where / name).stat().st_size)
        time.sleep(0.005)
    for w in workers:
        w.join()
    assert not caught, caught
    assert {n: s for n, s in seen.items() if s - {len(data)}} == {}     # never partial
    assert sorted(os.listdir(where)) == sorted(HOSTILE)                 # nothing else left
    for name in HOSTILE:
        assert (where / name).read_bytes() == data, name


def test_a_hostile_name_is_moved_with_a_create_only_token(grid, mint, payload):
    """The decoded MOVE carries the destination's token (storage.create may MOVE a new
    file: measured); a refused MOVE is ``auth`` and its message holds no token."""
    from gridxfer.movers.gfal import davmove
    name = "sp ace #ü%41'&.dat"
    dst = names.join_url(grid.resolve("t2-davs1/mvh/"), name)
    up = TokenPair(dst=mint("storage.read:/mvh", "storage.create:/mvh"))
    out = get_mover(payload, dst).copy(payload, dst, params=params(tokens=up))
    where = disk(grid, grid.resolve("t2-davs1/mvh/f")).parent
    assert out.checksum == SUM and (where / name).read_bytes() == DATA
    assert os.listdir(where) == [name]
    src = names.join_url(grid.resolve("t2-davs1/mvh/"), ".x y.gxpart-1")
    (where / ".x y.gxpart-1").write_bytes(b"x")
    token = mint("storage.read:/mvh")
    with pytest.raises(TransferError) as err:
        davmove.move(src, names.join_url(grid.resolve("t2-davs1/mvh/"), "x y"), token)
    assert err.value.error_class is ErrorClass.AUTH, err.value
    assert sorted(os.listdir(where)) == [".x y.gxpart-1", name]
    assert token.rsplit(".", 1)[1] not in str(err.value) and "eyJ" not in str(err.value)


@pytest.mark.parametrize("mode", ["pull", "push"])
def test_a_tpc_to_a_hostile_name_is_moved_into_place(grid, mode, monkeypatch):
    """HTTP-TPC writes the temporary name too; the decoded MOVE names the file."""
    monkeypatch.setenv("GRIDXFER_HTTP_TPC_MODE", mode)
    localgrid.put_local(grid, "h-xrd", f"tpch/{mode}.src", DATA)
    src = grid.endpoints["h-xrd"].davs_url + f"tpch/{mode}.src"
    name = f"{mode} #ü%41.dat"
    dst = names.join_url(grid.endpoints["h-xrd"].davs_url + f"tpch/{mode}/", name)
    out = get_mover(src, dst, third_party=True).copy(src, dst, params=params(third_party=True))
    assert (out.mode, out.checksum) == (f"http-tpc-{mode}", SUM)
    where = Path(grid.endpoints["h-xrd"].data_dir) / "tpch" / mode
    assert os.listdir(where) == [name] and (where / name).read_bytes() == DATA


def test_a_name_ending_in_a_space_is_still_written_in_place(grid, payload):
    """XrdHttp trims the Destination header: ``trail `` would become ``trail``. Such a
    name keeps the in-place write (davmove.carries is false)."""
    base = grid.endpoints["h-xrd"].davs_url + "trail/"
    url = names.join_url(base, "trail.dat ")
    out = get_mover(payload, url).copy(payload, url, params=params(overwrite=True))
    assert out.checksum == SUM
    assert leftovers(grid, url) == ["trail.dat "]


def test_a_question_mark_is_a_bad_name_for_http(grid, payload):
    """XrdHttp decodes %3F and then cuts the path at it, as at CGI (a%3Fb writes a)."""
    base = grid.endpoints["h-xrd"].davs_url + "hostile/"
    with pytest.raises(TransferError) as err:
        names.join_url(base, "q?mark.dat")
    assert err.value.error_class is ErrorClass.BAD_NAME
    url = base + "q%3Fmark.dat"                          # a journal row that smuggles one in
    with pytest.raises(TransferError) as err:
        get_mover(payload, url).copy(payload, url, params=params())
    assert err.value.error_class is ErrorClass.BAD_NAME
    assert not (Path(grid.endpoints["h-xrd"].data_dir) / "hostile" / "q").exists()


def test_stat_of_a_missing_source_is_source_missing(grid, payload, tmp_path):
    src = grid.endpoints["h-xrd"].davs_url + "nothing/here.dat"
    with pytest.raises(TransferError) as err:
        get_mover(src, f"file://{tmp_path}/x").copy(src, f"file://{tmp_path}/x",
                                                  params=replace(params(), checksum=None))
    assert err.value.error_class is ErrorClass.SOURCE_MISSING


@pytest.mark.parametrize("third_party", [False, True], ids=["streamed", "tpc"])
def test_overwrite_off_refuses_an_existing_destination_and_keeps_it(grid, payload, third_party,
                                                                    monkeypatch):
    """The destination's check runs beside the copy (dstcheck.py): the refusal still comes
    before any rename, the old file stays, the temporary name goes. The TPC source is the
    throttled server (2 MB/s), so the check answers while the copy runs."""
    monkeypatch.setenv("GRIDXFER_HTTP_TPC_MODE", "pull")
    tag = "tpc" if third_party else "streamed"
    src = payload
    if third_party:
        localgrid.put_local(grid, "h-slow", f"keep/{tag}.src", DATA)
        src = grid.endpoints["h-slow"].davs_url + f"keep/{tag}.src"
    localgrid.put_local(grid, "h-xrd", f"keep/{tag}/f.dat", b"old")
    dst = grid.endpoints["h-xrd"].davs_url + f"keep/{tag}/f.dat"
    with pytest.raises(TransferError) as err:
        get_mover(src, dst, third_party=third_party).copy(
            src, dst, params=params(third_party=third_party))
    assert err.value.error_class is ErrorClass.EXISTS, err.value
    assert disk(grid, dst).read_bytes() == b"old"
    deadline = time.monotonic() + 30
    while leftovers(grid, dst) != ["f.dat"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert leftovers(grid, dst) == ["f.dat"]
    out = get_mover(src, dst, third_party=third_party).copy(
        src, dst, params=params(third_party=third_party, overwrite=True))
    assert out.checksum == SUM and disk(grid, dst).read_bytes() == DATA
    assert leftovers(grid, dst) == ["f.dat"]


def test_the_destination_check_is_no_round_trip_in_front_of_the_copy(grid, payload,
                                                                      monkeypatch):
    """Overwrite off: the HEAD on the destination is asked on another thread while the
    copy runs (a WAN round trip per file off the critical path: bench.bulk --wan), not
    by the copying thread before its PUT. (A file this small: ``HeadOps``, davhead.)"""
    from gridxfer.movers.gfal import davs
    assert len(DATA) <= davs.SMALL
    real = davs.HeadOps.stat
    asked: list[tuple[str, threading.Thread]] = []

    def stat(self, url: str):
        asked.append((url, threading.current_thread()))
        return real(self, url)

    monkeypatch.setattr(davs.HeadOps, "stat", stat)
    dst = grid.endpoints["h-xrd"].davs_url + "beside/f.dat"
    out = get_mover(payload, dst).copy(payload, dst, params=params())
    assert out.checksum == SUM and disk(grid, dst).read_bytes() == DATA
    threads = [t for url, t in asked if url == dst]
    assert threads and threading.current_thread() not in threads, asked


def test_an_upload_takes_the_connection_its_servers_metadata_calls_keep(grid, tmp_path):
    """davix (neon backend) closes the connection of every PUT (sent with Expect:
    100-continue: ``doNotReuseSession``), so a PUT on a gfal2 context of its own paid a
    TCP + TLS handshake per file on the data path. On the server's own context
    (``davs._session_key``) it takes the connection the last metadata call left open.
    Run on a fresh thread: its contexts start with no connection at all."""
    import psutil
    from urllib.parse import urlsplit
    from gridxfer.movers.gfal import davs

    base = grid.endpoints["h-xrd"].davs_url
    port = urlsplit(base).port
    big = tmp_path / "big.dat"
    big.write_bytes(os.urandom(1 << 20) * 24)
    me = psutil.Process()

    def ours() -> set[int]:
        return {c.laddr.port for c in me.net_connections("tcp")
                if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED}

    found: dict[str, object] = {}

    def upload() -> None:
        known = ours()                              # other threads' connections, if any
        davs.HttpOps().mkdir(base + "reuse/")       # this thread's first connection
        found["metadata"] = ours() - known
        seen: set[int] = set()
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                seen.update(ours())
                time.sleep(0.001)

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            davs.streamed(f"file://{big}", base + "reuse/big.dat", params())
        finally:
            done.set()
            sampler.join()
        found["during upload"] = seen - known

    worker = threading.Thread(target=upload)
    worker.start()
    worker.join()
    assert len(found["metadata"]) == 1, found         # type: ignore[arg-type]
    assert found["during upload"] <= found["metadata"], found   # type: ignore[operator]
    assert disk(grid, base + "reuse/big.dat").stat().st_size == 24 << 20


def test_head_answers_size_and_adler32_as_gfal2_does(grid, mint, payload):
    """davhead on the real XrdHttp: one HEAD gives the size and (Want-Digest) the adler32
    gfal2's checksum gives; 404 is 'not there'; a refusal is None (gfal2 asks instead)."""
    from gridxfer.movers.gfal import davhead, davs
    writer = mint("storage.read:/head", "storage.create:/head")
    for base, up, read in ((grid.endpoints["h-xrd"].davs_url, None, None),
                           (grid.resolve("t2-davs1/"), writer, mint("storage.read:/head"))):
        dst = base + "head/f.dat"
        get_mover(payload, dst).copy(payload, dst, params=params(
            overwrite=True, tokens=TokenPair(dst=up) if up else None))
        got = davhead.head(dst, read, digest=True)
        assert got == davhead.Head(True, len(DATA), SUM), got
        assert davs.HttpOps(read).checksum(dst) == SUM
        assert davhead.head(dst, read) == davhead.Head(True, len(DATA))      # not asked
        assert davhead.head(base + "head/none.dat", read) == davhead.Head(False)
        if read:
            assert davhead.head(dst, None) is None              # refused: gfal2's error


@pytest.mark.parametrize("size", [4096, (4 << 20) + 1], ids=["small", "bulk"])
def test_a_small_destination_is_checked_by_head_and_a_bulk_one_by_gfal2(grid, tmp_path, size,
                                                                        monkeypatch):
    """Up to davs.SMALL the destination's size, adler32 and MOVE take davhead and davmove
    (a kept connection); a larger file keeps gfal2's metadata path (its next call opens the
    connection the next PUT takes). Both verified, both land under their name."""
    from gridxfer.movers.gfal import davs
    gfal2_calls: list[str] = []
    for name in ("stat", "checksum", "rename"):
        real = getattr(davs.HttpOps, name)

        def spy(self, *args, _real=real, _name=name):     # HeadOps' fallbacks come here too
            gfal2_calls.append(_name)
            return _real(self, *args)
        monkeypatch.setattr(davs.HttpOps, name, spy)
    data = os.urandom(size)
    src = tmp_path / "src.dat"
    src.write_bytes(data)
    dst = grid.endpoints["h-xrd"].davs_url + f"route-{size}/f.dat"
    out = get_mover(f"file://{src}", dst).copy(f"file://{src}", dst, params=params())
    assert out.checksum == f"{zlib.adler32(data) & 0xFFFFFFFF:08x}"
    assert disk(grid, dst).read_bytes() == data and leftovers(grid, dst) == ["f.dat"]
    if size <= davs.SMALL:
        assert gfal2_calls == [], gfal2_calls
    else:
        assert {"stat", "checksum", "rename"} <= set(gfal2_calls), gfal2_calls


def test_a_local_sources_adler32_stays_the_pass_that_can_stop(grid, payload, monkeypatch):
    """The davs mover asks a small file's source stat itself (to pick HeadOps), and hands
    a remote source's answer on (StatOnce); a file:// source stays LocalOps, whose
    background adler32 stops when the copy fails or is cancelled."""
    from gridxfer.movers import integrity
    from gridxfer.movers.ops import LocalOps
    real = integrity._background_checksum
    seen: list[type] = []

    def spy(ops, url, stop):
        seen.append(type(ops))
        return real(ops, url, stop)

    monkeypatch.setattr(integrity, "_background_checksum", spy)
    dst = grid.endpoints["h-xrd"].davs_url + "local-sum/f.dat"
    out = get_mover(payload, dst).copy(payload, dst, params=params())
    assert out.checksum == SUM and seen == [LocalOps], seen


@pytest.mark.parametrize("size", [4096, (64 << 10) + 1], ids=["read-back", "digest"])
@pytest.mark.parametrize("source", ["file", "davs"])
def test_a_small_file_is_sent_on_the_kept_connection(grid, tmp_path, monkeypatch, size, source):
    """Up to davs.SMALL the bytes go in one PUT of davput (no gfal2 copy, whose davix loads
    the proxy per request and closes each PUT's connection); a davs source is read whole
    by one GET whose bytes serve the copy and the source's adler32 (no digest job on the
    source server). Up to davhead.READ_BACK_MAX the destination is verified by reading the
    file back, above it by the server's digest. Either way the adler32s are the server's
    own."""
    from gridxfer.movers.gfal import davhead, davput, davs, digestgate
    calls: list[str] = []

    def spy(module, name):
        real = getattr(module, name)

        def wrapped(*args, **kw):
            calls.append(name)
            return real(*args, **kw)
        monkeypatch.setattr(module, name, wrapped)

    for module, name in ((davput, "read"), (davhead, "read_back"), (davhead, "head"),
                         (davs, "streamed")):
        spy(module, name)
    digests: list[str] = []                 # the URLs a server's digest was asked for
    held = digestgate.held

    def asked(url, *args):
        digests.append(url)
        return held(url, *args)
    monkeypatch.setattr(digestgate, "held", asked)
    data = os.urandom(size)
    want = f"{zlib.adler32(data) & 0xFFFFFFFF:08x}"
    base = grid.endpoints["h-xrd"].davs_url
    (tmp_path / "s.dat").write_bytes(data)
    src = f"file://{tmp_path}/s.dat"
    if source == "davs":
        get_mover(src, base + f"put-src-{size}/s.dat").copy(
            src, base + f"put-src-{size}/s.dat", params=params(overwrite=True))
        src = base + f"put-src-{size}/s.dat"
    dst = base + f"put-{source}-{size}/f.dat"
    calls.clear()
    digests.clear()
    out = get_mover(src, dst).copy(src, dst, params=params())
    assert (out.mode, out.checksum, out.bytes) == (davput.MODE, want, size)
    assert disk(grid, dst).read_bytes() == data and leftovers(grid, dst) == ["f.dat"]
    assert "streamed" not in calls, calls
    assert calls.count("read") == 1, calls                      # one read of the source
    assert ("read_back" in calls) == (size <= davhead.READ_BACK_MAX), calls
    # no digest of the source (its adler32 is that of the bytes read); one of the
    # destination's temporary name above READ_BACK_MAX, through the server's gate
    assert not any(u.startswith(base + f"put-src-{size}/") for u in digests), digests
    assert len(digests) == (size > davhead.READ_BACK_MAX), digests
    assert davs.HttpOps().checksum(dst) == want                  # the server's, via gfal2


def test_a_refused_put_goes_to_gfal2_whose_error_it_is(grid, mint, payload, monkeypatch):
    """A PUT the server refuses (a token without storage.create: 403) is not classified by
    davput: gfal2 copies instead, and its AUTH error is the copy's; nothing is left."""
    from gridxfer.movers.gfal import davput, davs
    answers: list[bool] = []
    real_put, real_streamed = davput.put, davs.streamed
    monkeypatch.setattr(davput, "put", lambda *a, **k: answers.append(real_put(*a, **k))
                        or answers[-1])
    fell_back: list[str] = []
    monkeypatch.setattr(davs, "streamed", lambda s, t, *a, **k: fell_back.append(t)
                        or real_streamed(s, t, *a, **k))
    dst = grid.resolve("t2-davs1/put-refused/f.dat")
    first = grid.resolve("t2-davs1/put-refused/first.dat")     # the directory made (and
    get_mover(payload, first).copy(payload, first, params=params(   # known made: no MKCOL
        tokens=TokenPair(dst=mint("storage.read:/put-refused",        # to be refused next)
                                  "storage.create:/put-refused"))))
    answers.clear()
    with pytest.raises(TransferError) as err:
        get_mover(payload, dst).copy(payload, dst, params=params(
            tokens=TokenPair(dst=mint("storage.read:/"))))
    assert err.value.error_class is ErrorClass.AUTH, err.value
    assert answers == [False] and len(fell_back) == 1, (answers, fell_back)
    assert "eyJ" not in str(err.value)
    assert not disk(grid, dst).exists() and leftovers(grid, dst) == ["first.dat"]


def test_a_davs_source_is_stated_by_propfind_which_tells_a_directory(grid, payload):
    """XrdHttp answers a HEAD on a directory with its size as for a file: the source's
    stat is one PROPFIND (davhead.propstat), and a directory is refused before any byte
    is read or written."""
    from gridxfer.movers.gfal import davhead
    base = grid.endpoints["h-xrd"].davs_url
    get_mover(payload, base + "pdir/f.dat").copy(payload, base + "pdir/f.dat",
                                                  params=params(overwrite=True))
    assert davhead.propstat(base + "pdir/f.dat", None) == davhead.Head(True, len(DATA))
    assert davhead.propstat(base + "pdir", None).directory
    assert davhead.propstat(base + "pdir/none.dat", None) == davhead.Head(False)
    dst = base + "pdir-copy/f.dat"
    with pytest.raises(TransferError) as err:
        get_mover(base + "pdir", dst).copy(base + "pdir", dst, params=params())
    assert "source is a directory" in str(err.value)
    assert leftovers(grid, dst) == []


def test_digests_to_one_server_stay_within_its_slots(grid, tmp_path, monkeypatch):
    """Copies at once ask a server at most GRIDXFER_HTTP_DIGEST_SLOTS digests at once
    (digestgate): past its checksum job table XrdHttp holds a digest for 30 s (a campaign
    of 1 MB files at 32 took 33 s instead of 3; the bench measures it)."""
    from gridxfer.movers.gfal import davsession, digestgate
    monkeypatch.setenv("GRIDXFER_HTTP_DIGEST_SLOTS", "2")
    digestgate.reset()
    inside, most, lock = [0], [0], threading.Lock()
    request = davsession.request

    def counted(method, url, headers, **kw):
        asks = "Want-Digest" in headers
        with lock:
            inside[0] += asks
            most[0] = max(most[0], inside[0])
        try:
            return request(method, url, headers, **kw)
        finally:
            with lock:
                inside[0] -= asks
    monkeypatch.setattr(davsession, "request", counted)
    base = grid.endpoints["h-xrd"].davs_url + "gate/"
    files = {i: os.urandom((128 << 10) + i) for i in range(10)}     # above READ_BACK_MAX
    for i, data in files.items():
        (tmp_path / f"s{i}.dat").write_bytes(data)
    errors: list[BaseException] = []

    def copy(i: int) -> None:
        src, dst = f"file://{tmp_path}/s{i}.dat", base + f"f{i}.dat"
        try:
            get_mover(src, dst).copy(src, dst, params=params())
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=copy, args=(i,)) for i in files]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        digestgate.reset()
    assert errors == []
    assert 1 <= most[0] <= 2
    for i, data in files.items():
        assert disk(grid, base + f"f{i}.dat").read_bytes() == data
