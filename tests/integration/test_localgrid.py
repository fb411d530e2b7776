"""The embedded local grid on real servers: every protocol, checksums, TPC, throttle, teardown."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import psutil
import pytest

from gridxfer.testbed import localgrid
from gridxfer.testbed.inventory import TestbedError
from gridxfer.testbed.localgrid import ServerSpec
from gridxfer.testbed.procs import alive
from gridxfer.testbed.xrootd import start_xrootd

pytestmark = pytest.mark.integration

GRIDXFER = [sys.executable, "-m", "gridxfer"]


def adler32(path: Path) -> str:
    return f"{zlib.adler32(Path(path).read_bytes()) & 0xFFFFFFFF:08x}"


def run(argv, **kw) -> subprocess.CompletedProcess:
    # Debian's gfal2-util 1.8 tools sometimes abort at exit under CPU load with "free():
    # invalid pointer" / "munmap_chunk(): invalid pointer" (SIGABRT) after their work is
    # done (a fresh-clone run saw gfal-rm print "DELETED", then abort). gfal-copy is
    # retried, a few times only; gfal-rm counts when it reported the deletion (a retry
    # would find nothing to delete), and the caller checks the file is gone.
    for _ in range(3):
        res = subprocess.run(argv, capture_output=True, text=True, timeout=60, **kw)
        if argv[0] == "gfal-rm" and res.returncode < 0 and "\tDELETED" in res.stdout:
            return res
        if not (argv[0] == "gfal-copy" and res.returncode < 0):
            break
    assert res.returncode == 0, f"{argv} -> {res.returncode}: {res.stderr[-500:]}"
    return res


@pytest.fixture(scope="module")
def payload(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("payload") / "file.dat"
    path.write_bytes(os.urandom(3_000_000) + b"\0" * 1_000_000)
    return path


def test_default_grid_layout(local_grid):
    assert set(local_grid.endpoints) == {"t0-xrd", "t0-gsiftp", "t1a-xrd1", "t1a-xrd2",
                                         "t1a-gsiftp", "t1b-xrd", "t1b-ftp", "t1-tape"}
    assert {ep.tier for ep in local_grid.endpoints.values()} == {"T0", "T1A", "T1B", "T1T"}
    assert [n for n, ep in local_grid.endpoints.items() if ep.tape_backed] == ["t1-tape"]
    assert {ep.protocol for ep in local_grid.endpoints.values()} == {"root", "gsiftp", "ftp"}
    assert all(psutil.pid_exists(ep.pid) for ep in local_grid.endpoints.values())
    if os.geteuid() == 0:   # xrootd never runs as root
        owners = {psutil.Process(ep.pid).username() for ep in local_grid.endpoints.values()
                  if ep.kind == "xrootd"}
        assert owners == {"gridxfer"}


@pytest.mark.parametrize("name", ["t0-xrd", "t1a-xrd2"])
def test_xrdcp_roundtrip_and_checksum_query(local_grid, payload, tmp_path, name):
    url = local_grid.resolve(f"{name}/rt/{name}.dat")
    run(["xrdcp", "-f", "-s", str(payload), url])
    run(["xrdcp", "-f", "-s", url, str(tmp_path / "back")])
    assert (tmp_path / "back").read_bytes() == payload.read_bytes()
    ep = local_grid.endpoints[name]
    out = run(
        ["xrdfs", f"root://127.0.0.1:{ep.port}", "query", "checksum", f"/data/rt/{name}.dat"]
    ).stdout
    assert out.split() == ["adler32", adler32(payload)]
    assert adler32(local_grid.local_path(url)) == adler32(payload)


def _minor_faults(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


def test_xrootd_checksum_reuses_its_read_buffer(local_grid, tmp_path):
    """xrootd reads a file into a malloc'ed buffer to checksum it; with the testbed's malloc
    tunables the buffer stays in the heap, so a second 16 MB file costs far fewer page
    faults than its 4,096 pages (without them: a fresh mmap per query, >= 4,096 faults)."""
    ep = local_grid.endpoints["t1b-xrd"]
    # raw: glibc splits GLIBC_TUNABLES in place at start-up, so parsed views see only its head
    assert b"glibc.malloc.mmap_max=0" in Path(f"/proc/{ep.pid}/environ").read_bytes()
    faults = []
    for i in range(3):
        src = tmp_path / f"big{i}"
        src.write_bytes(os.urandom(16 << 20))
        run(["xrdcp", "-f", "-s", str(src), local_grid.resolve(f"t1b-xrd/cksbuf/big{i}")])
        before = _minor_faults(ep.pid)
        out = run(
            ["xrdfs", f"root://127.0.0.1:{ep.port}", "query", "checksum", f"/data/cksbuf/big{i}"]
        ).stdout
        faults.append(_minor_faults(ep.pid) - before)
        assert out.split() == ["adler32", adler32(src)]
    assert min(faults[1:]) < 2048, faults


@pytest.mark.parametrize("name", ["t0-gsiftp", "t1b-ftp"])
def test_gfal_and_globus_url_copy_roundtrip(local_grid, payload, tmp_path, name):
    env = {**os.environ, **local_grid.client_env()}
    up1 = local_grid.resolve(f"{name}/gfal/f.dat")
    run(["gfal-copy", "-f", "-p", f"file://{payload}", up1], env=env)
    up2 = local_grid.resolve(f"{name}/guc/f.dat")
    run(["globus-url-copy", "-cd", f"file://{payload}", up2], env=env)
    run(["gfal-copy", "-f", up2, f"file://{tmp_path}/back"], env=env)
    run(["globus-url-copy", up1, f"file://{tmp_path}/back2"], env=env)
    for path in (tmp_path / "back", tmp_path / "back2", local_grid.local_path(up1),
                 local_grid.local_path(up2)):
        assert Path(path).read_bytes() == payload.read_bytes()


def test_gsiftp_needs_the_proxy(local_grid, payload, tmp_path):
    """GSI is real: without a proxy the server refuses us."""
    env = {**os.environ, **local_grid.client_env(), "X509_USER_PROXY": str(tmp_path / "none.pem")}
    res = subprocess.run(
        ["globus-url-copy", f"file://{payload}", local_grid.resolve("t0-gsiftp/noauth")],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert res.returncode != 0
    assert not local_grid.local_path(local_grid.resolve("t0-gsiftp/noauth")).exists()


def test_python_gfal2_gsiftp_and_root(local_grid, payload):
    pytest.importorskip("gfal2")
    from gridxfer.movers.gfal.mover import new_context
    ctx = new_context()
    params = ctx.transfer_parameters()
    params.overwrite, params.create_parent = True, True
    for name in ("t1a-gsiftp", "t1b-xrd"):
        url = local_grid.resolve(f"{name}/py/f.dat")
        ctx.filecopy(params, f"file://{payload}", url)
        assert ctx.checksum(url, "ADLER32") == adler32(payload)


def test_tpc_root_to_root(local_grid, payload):
    src, dst = local_grid.resolve("t0-xrd/tpc/f.dat"), local_grid.resolve("t1a-xrd1/tpc/f.dat")
    run(["xrdcp", "-f", "-s", str(payload), src])
    run(["xrdcp", "-f", "-s", "--tpc", "only", src, dst])   # fails if the servers cannot do TPC
    assert adler32(local_grid.local_path(dst)) == adler32(payload)


def test_tpc_gsiftp_to_gsiftp(local_grid, payload):
    env = {**os.environ, **local_grid.client_env()}
    src, dst = local_grid.resolve("t0-gsiftp/tpc/f.dat"), local_grid.resolve("t1a-gsiftp/tpc/f.dat")
    run(["gfal-copy", "-f", "-p", f"file://{payload}", src], env=env)
    # globus-url-copy between two gsiftp URLs is always third-party (server to server)
    run(["globus-url-copy", "-cd", src, dst], env=env)
    # gfal-copy (gfal2 2.21.3's gridftp plugin) very rarely dies by a signal on a
    # gsiftp->gsiftp copy: SIGABRT "free(): invalid pointer" (2 in ~50 runs, loaded CPU) and
    # SIGSEGV (1 in 20 fresh-clone runs, two make tests side by side). That is the peer
    # tool's crash, not the servers' answer this test checks: a death by a signal is tried
    # again, up to three times; any exit status of its own is the answer.
    for _attempt in range(3):
        res = subprocess.run(["gfal-copy", "-f", src, dst + ".gfal"], env=env, capture_output=True,
                             text=True, timeout=60)
        if res.returncode >= 0:
            break
    assert res.returncode == 0, (res.returncode, res.stderr[-500:])
    assert adler32(local_grid.local_path(dst)) == adler32(payload)
    assert adler32(local_grid.local_path(dst + ".gfal")) == adler32(payload)
    # the server writes its log line as the session ends, which may be after gfal-copy has
    # returned (it failed once under load): poll with a deadline
    log = Path(local_grid.endpoints["t1a-gsiftp"].log)
    deadline = time.monotonic() + 30
    while "tpc/f.dat.gfal" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "tpc/f.dat.gfal" in log.read_text()


def test_throttle_slows_a_single_stream_read(make_grid, tmp_path):
    rate = 4_000_000
    inv = make_grid(
        [ServerSpec("slow", "xrootd", "T1", throttle=rate), ServerSpec("fast", "xrootd", "T1")]
    )
    # XrdThrottle lets roughly the first interval (~1 s) through unthrottled, so use a file
    # several intervals long: measured ~4.1 MB/s steady state for a 4 MB/s throttle. Under
    # heavy load one read once took 1.35 s (a burst beyond the first interval), so the slow
    # server is read up to three times back to back: once it is in its steady state (no idle
    # in between), a read must take at least half the nominal time. Load only slows reads.
    data = os.urandom(12_000_000)
    bound = 0.5 * len(data) / rate                                   # 1.5 s at 4 MB/s
    for name in ("slow", "fast"):
        Path(inv.endpoints[name].data_dir, "f.dat").write_bytes(data)

    def read(name: str) -> float:
        start = time.monotonic()
        run(["xrdcp", "-f", "-s", inv.resolve(f"{name}/f.dat"), str(tmp_path / name)])
        return time.monotonic() - start

    slow = [read("slow")]
    while slow[-1] < bound and len(slow) < 3:
        slow.append(read("slow"))
    assert max(slow) >= bound, slow
    assert (tmp_path / "slow").read_bytes() == data
    fast = read("fast")
    assert fast < max(slow), (fast, slow)


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="tmpfs size limit needs root")
def test_size_limited_server_gives_enospc_and_down_unmounts(make_grid, tmp_path, monkeypatch):
    inv = make_grid([ServerSpec("tiny", "xrootd", "T1", size_limit=2 * 2**20)])
    big = tmp_path / "big"
    big.write_bytes(os.urandom(3 * 2**20))
    res = subprocess.run(["xrdcp", "-f", "-s", str(big), inv.resolve("tiny/big")],
                         capture_output=True, text=True)
    assert res.returncode != 0 and "no space left" in res.stderr.lower()
    mount = inv.endpoints["tiny"].data_dir
    assert os.path.ismount(mount)
    monkeypatch.setenv("GRIDXFER_HOME", str(tmp_path / "grid0"))   # make_grid's home for this grid
    localgrid.down()
    assert not os.path.ismount(mount) and not Path(inv.base_dir).exists()
    assert not alive(inv.endpoints["tiny"].pid)


def test_start_failure_reports_log_tail(tmp_path):
    srv_parent = tempfile.mkdtemp(prefix="gridxfer-grid-test-")     # reachable by the server user
    os.chmod(srv_parent, 0o755)
    try:
        _start_on_busy_port(srv_parent)
    finally:
        shutil.rmtree(srv_parent, ignore_errors=True)


def test_unreachable_server_dir_is_a_clear_error(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("only root drops privileges for the servers")
    os.chmod(tmp_path, 0o700)
    with pytest.raises(TestbedError, match="cannot enter"):
        start_xrootd("x", tmp_path / "srv")


def _start_on_busy_port(srv_parent: str) -> None:
    """A server that cannot start (its port is taken) gives one clear error with its log."""
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as busy:
        busy.bind(("::", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(TestbedError) as err:
            start_xrootd("broken", Path(srv_parent) / "srv", port=port, ready_timeout=10)
    msg = str(err.value)
    assert "broken" in msg and "exited during start-up" in msg and "xrootd.log" in msg
    assert "\n" not in msg and "address already in use" in msg


def _procs_mentioning(marker: str) -> list[int]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(marker in a for a in (p.info["cmdline"] or ())):
                found.append(p.pid)
        except psutil.Error:
            pass
    return found


@pytest.mark.parametrize("when", ["after_up", "during_up"])
def test_down_after_kill9_of_up_leaves_no_process(tmp_path, when):
    home = tmp_path / "home"
    env = {**os.environ, "GRIDXFER_HOME": str(home)}
    errors = tmp_path / "up.err"
    with errors.open("w") as err:
        proc = subprocess.Popen([*GRIDXFER, "testbed", "up"], env=env, stdout=subprocess.DEVNULL,
                                stderr=err, start_new_session=True)
    pointer, inventory = home / "testbed" / "local.json", home / "testbed" / "inventory.json"
    # generous: `testbed up` starts a dozen TLS servers; with two test suites and a CPU hog
    # on two cores it took over 40 s once (the old deadline). Progress is polled, not timed.
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            if when == "after_up" and inventory.exists():
                break
            if when == "after_up" and proc.poll() is not None:
                pytest.fail(f"testbed up ended ({proc.returncode}) before its inventory: "
                            f"{errors.read_text()[-500:]}")
            if (
                when == "during_up"
                and pointer.exists()
                and list(Path(json.loads(pointer.read_text())["base_dir"]).rglob("*.gxpid"))
            ):
                break
            assert proc.poll() is None or when == "after_up", "testbed up ended before the kill"
            time.sleep(0.02)
        else:
            pytest.fail("testbed up did not get far enough")
        base = json.loads(pointer.read_text())["base_dir"] if pointer.exists() else None
        if base is None:
            base = json.loads(inventory.read_text())["base_dir"]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(5)
        running = time.monotonic() + 10     # a half-started server: give it time to show
        while not _procs_mentioning(base + "/") and time.monotonic() < running:
            time.sleep(0.05)
        assert _procs_mentioning(base + "/"), "no server was running at kill time"
        res = subprocess.run([*GRIDXFER, "testbed", "down"], env=env,
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        assert _procs_mentioning(base + "/") == []
        assert not Path(base).exists() and not inventory.exists()
        st = subprocess.run([*GRIDXFER, "testbed", "status", "--json"], env=env,
                            capture_output=True, text=True, timeout=60)
        assert json.loads(st.stdout)["up"] is False
    finally:
        if proc.poll() is None:
            proc.kill()
        subprocess.run([*GRIDXFER, "testbed", "down"], env=env, capture_output=True, timeout=60)


def test_put_local_files_are_served_and_replaceable(local_grid, tmp_path):
    env = {**os.environ, **local_grid.client_env()}
    data = os.urandom(100_000)
    url = localgrid.put_local(local_grid, "t1a-gsiftp", "seeded/deep/f.dat", data)
    assert url == local_grid.resolve("t1a-gsiftp/seeded/deep/f.dat")
    run(["gfal-copy", "-f", url, f"file://{tmp_path}/f"], env=env)
    assert (tmp_path / "f").read_bytes() == data
    # the server (running as the service user) may overwrite and delete it
    run(["globus-url-copy", f"file://{tmp_path}/f", url + ".2"], env=env)
    run(["gfal-rm", url], env=env)
    assert not local_grid.local_path(url).exists()


def test_cli_env_and_status_json(local_grid_home, local_grid):
    env = {**os.environ, "GRIDXFER_HOME": str(local_grid_home)}
    out = run([*GRIDXFER, "testbed", "env"], env=env).stdout
    assert f"export X509_USER_PROXY={local_grid.env['X509_USER_PROXY']}" in out.splitlines()
    st = json.loads(run([*GRIDXFER, "testbed", "status", "--json"], env=env).stdout)
    assert st["up"] is True and st["mode"] == "local"
    assert {n: e["url"] for n, e in st["endpoints"].items()} == {n: e.url for n,
                                                                 e in local_grid.endpoints.items()}
    assert all(e["alive"] for e in st["endpoints"].values())
    res = subprocess.run([*GRIDXFER, "testbed", "up"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 1 and "already up" in res.stderr and "Traceback" not in res.stderr


def test_xrootd_log_rotation_waits_for_a_signal_not_for_midnight(make_grid):
    """xrootd 5.5's midnight log-rotation thread calls getenv while start-up still sets
    variables: 5 of 1,800 starts under load died in getenv (SIGSEGV, empty log), which
    failed the session's local_grid and ~100 tests with it. Every testbed xrootd runs with
    ``-k winch``: the rotation thread waits for SIGWINCH instead."""
    inv = make_grid([ServerSpec("k", "xrootd", "T1")])
    argv = psutil.Process(inv.endpoints["k"].pid).cmdline()
    assert argv[0].endswith("xrootd") and argv[argv.index("-k") + 1] == "winch", argv
    assert "-l" in argv                                     # still logging to its file


def test_stop_server_makes_an_unreachable_endpoint(make_grid, tmp_path, monkeypatch):
    inv = make_grid([ServerSpec("a", "xrootd", "T1"), ServerSpec("b", "ftp", "T1")])
    localgrid.stop_server(inv, "a")
    localgrid.stop_server(inv, "b")
    assert not alive(inv.endpoints["a"].pid) and not alive(inv.endpoints["b"].pid)
    start = time.monotonic()
    res = subprocess.run(["xrdcp", "-f", "-s", "/etc/hostname", inv.resolve("a/x")],
                         capture_output=True,
                         text=True, timeout=60, env={**os.environ, **inv.client_env()})
    assert res.returncode != 0 and time.monotonic() - start < 30   # client env: fail fast
    monkeypatch.setenv("GRIDXFER_HOME", str(tmp_path / "grid0"))
    st = localgrid.status()
    assert st["endpoints"]["a"]["alive"] is False and st["endpoints"]["b"]["alive"] is False


def test_grid_owned_by_a_killed_process_is_reaped(tmp_path, grid_ca):
    """A test session killed -9 (owner_pid) does not leave its servers behind."""
    home = tmp_path / "home"
    code = ("import os, sys, time\n"
            "from gridxfer.testbed import localgrid\n"
            "spec = localgrid.LocalGridSpec(servers=(localgrid.ServerSpec('x', 'xrootd', 'T'),),"
            " owner_pid=os.getpid())\n"
            "inv = localgrid.up(spec)\n"
            "print(inv.base_dir, flush=True)\n"
            "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code],
                            env={**os.environ, "GRIDXFER_HOME": str(home)},
                            stdout=subprocess.PIPE, text=True)
    try:
        base = proc.stdout.readline().strip()
        assert base and _procs_mentioning(base + "/")
        proc.kill()
        proc.wait(5)
        deadline = time.monotonic() + 120      # the reaper's poll, on a loaded machine
        while _procs_mentioning(base + "/") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _procs_mentioning(base + "/") == []
        while Path(base).exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not Path(base).exists() and not (home / "testbed" / "local.json").exists()
    finally:
        proc.kill()
        subprocess.run([*GRIDXFER, "testbed", "down"],
                       env={**os.environ, "GRIDXFER_HOME": str(home)},
                       capture_output=True, timeout=60)
