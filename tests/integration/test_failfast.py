"""Fail fast on a dead endpoint (issue 17), on real XRootD:

- a tier whose only endpoint is a closed loopback port fails its files with the connection
  error within retries.max x backoff of going down, instead of waiting out the circuit
  breaker's cooldowns (it took 3 min for 3 files: XrdCl held the requests for the whole
  timeout, and the cooldowns overrode the retries);
- a pool of one dead and one live endpoint completes on the live one, and the live view
  shows the dead one excluded with its reason; the report never calls it a BLACK HOLE;
- ``on_pool_down: {wait: D}`` waits for the pool: it fails at the bound, or completes when
  an xrootd starts on the dead port mid-run.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import tempfile
import threading
import time
import zlib
from pathlib import Path

import pytest

from gridxfer.campaign import runner
from gridxfer.campaign.journal import names as endpoint_names
from gridxfer.cli.progress import health_lines
from gridxfer.cli.main import main

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
CONNECT_TIMEOUT = 10.0          # movers/xrootd/env.py: XrdCl's ConnectionWindow, one try


def closed_port() -> int:
    """A loopback port nothing listens on: bound, read, closed."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def sources(tmp_path: Path, n: int, size: int = 200_000) -> tuple[Path, dict[str, str]]:
    src = tmp_path / "src"
    src.mkdir()
    out = {}
    for i in range(n):
        data = os.urandom(size)
        (src / f"f{i}.dat").write_bytes(data)
        out[f"f{i}.dat"] = f"{zlib.adler32(data) & 0xFFFFFFFF:08x}"
    return src, out


def write_spec(tmp_path: Path, name: str, src: Path, pool: list[str], extra: str = "",
               retries: str = "{max: 1, backoff: 1s}") -> Path:
    urls = ", ".join(f'"{u}"' for u in pool)
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"campaign: {name}\n"
                    f"source: {{url: \"{src.as_uri()}/\", files: {{glob: \"*.dat\"}}}}\n"
                    f"destinations:\n  - tier: T1\n    pool: [{urls}]\n"
                    f"retries: {retries}\ntimeout: 5s\n{extra}")
    return path


def journal(home: Path, name: str) -> sqlite3.Connection:
    conn = sqlite3.connect(home / "campaigns" / f"{name}.sqlite", timeout=10)
    conn.row_factory = sqlite3.Row
    return conn


def events(conn: sqlite3.Connection, kind: str) -> list[tuple[float, dict]]:
    return [(ts, json.loads(d)) for ts, d in conn.execute(
        "SELECT ts, detail FROM events WHERE kind = ? ORDER BY id", (kind,))]


def test_dead_endpoint_fails_the_files_with_its_reason(gridxfer_home, tmp_path, capsys):
    dead = f"root://127.0.0.1:{closed_port()}//tmp/gx-dead/"
    src, _ = sources(tmp_path, 3)
    spec = write_spec(tmp_path, "dead", src, [dead])
    assert main(["campaign", "run", str(spec), "--quiet"]) == 3
    out = capsys.readouterr().out
    with journal(gridxfer_home, "dead") as conn:
        files = [dict(r) for r in conn.execute("SELECT * FROM files")]
        attempts = [dict(r) for r in conn.execute("SELECT * FROM attempts")]
        down = events(conn, "pool_down")
        failed = events(conn, "pool_failed")
    assert len(files) == 3 and {f["state"] for f in files} == {"failed"}
    for f in files:
        assert f["error_class"] == "connection", f
        assert f"{dead} excluded: circuit open: 1 failure in a row (last: connection)" \
            in f["error_msg"] and "on_pool_down: fail" in f["error_msg"], f
        assert f["attempts"] <= 2                              # retries.max + 1
        assert f"FAILED T1 {f['name']}: connection: " in out
    # refused at once, not held until the transfer's timeout (XrdCl's defaults did that)
    assert attempts and len(attempts) <= 4                     # the first dispatch only
    assert {a["error_class"] for a in attempts} == {"connection"}
    assert all(a["ended"] - a["started"] < 5.0 for a in attempts), attempts
    # the tier's pool went down once and its files failed at since + max x backoff
    assert len(down) == 1 and down[0][1]["deadline"] - down[0][1]["since"] == pytest.approx(1.0)
    assert failed and failed[0][0] >= down[0][1]["deadline"]
    budget = 1 * 1.0 + CONNECT_TIMEOUT                         # retries.max x backoff + connect
    spent = max(f["updated"] for f in files) - min(a["started"] for a in attempts)
    assert spent < 10 * budget                                 # generous: it is ~1 s


def test_dead_and_live_pool_completes_and_shows_the_exclusion(local_grid, gridxfer_home,
                                                              tmp_path, capsys):
    dead = f"root://127.0.0.1:{closed_port()}//tmp/gx-dead/"
    live = local_grid.endpoints["t1a-xrd1"].url + f"ff-{os.getpid()}-{time.time_ns()}/"
    src, expected = sources(tmp_path, 12)
    spec = write_spec(tmp_path, "mixed", src, [dead, live], retries="{max: 3, backoff: 1s}")
    snaps: list = []
    res = runner.run_campaign(spec, observers=[snaps.append], selector_name="round-robin")
    assert (res.state, res.files_done, res.files_failed) == ("done", 12, 0)
    with journal(gridxfer_home, "mixed") as conn:
        rows = conn.execute("SELECT name, endpoint, dst_url FROM files").fetchall()
        excluded = events(conn, "excluded")
        assert not events(conn, "pool_down")
    assert {r["endpoint"] for r in rows} == {live}
    for r in rows:
        data = local_grid.local_path(r["dst_url"]).read_bytes()
        assert f"{zlib.adler32(data) & 0xFFFFFFFF:08x}" == expected[r["name"]]
    assert any(e["url"] == dead and "last: connection" in e["reason"] for _, e in excluded)
    with journal(gridxfer_home, "mixed") as conn:
        names = endpoint_names.read(conn)      # the one name every view shows (issue 22)
    assert names[dead] != names[live]
    lines = [line for s in snaps for line, _ in health_lines(s, names)]
    assert any(line.startswith(f"excluded T1 {names[dead]}: circuit open: 1 failure in a row "
                               "(last: connection)") for line in lines), lines
    capsys.readouterr()
    assert main(["campaign", "report", "mixed"]) == 0
    report = capsys.readouterr().out
    assert names[dead] in report and "BLACK HOLE" not in report, report


def test_wait_fails_at_its_bound(gridxfer_home, tmp_path):
    dead = f"root://127.0.0.1:{closed_port()}//tmp/gx-dead/"
    src, _ = sources(tmp_path, 3)
    spec = write_spec(tmp_path, "waitfail", src, [dead],
                      "on_pool_down: {wait: 4s}\n"
                      "circuit_breaker: {cooldown: 1s, max_cooldown: 1s}\n")
    res = runner.run_campaign(spec)
    assert res.files_failed == 3
    with journal(gridxfer_home, "waitfail") as conn:
        files = [dict(r) for r in conn.execute("SELECT * FROM files")]
        down = events(conn, "pool_down")[0][1]
        probes = conn.execute("SELECT count(*) FROM attempts WHERE started > ?",
                              (down["since"],)).fetchone()[0]
    assert down["on_pool_down"] == "wait" and down["deadline"] - down["since"] == 4.0
    for f in files:     # waited for the pool without spending their retries (max 1): only
        # a probe that ended after the deadline counts (XRD_CONNECTIONWINDOW can make it last)
        assert f["error_class"] == "connection" and f["attempts"] <= 1, f
        assert "on_pool_down: wait 4.0s" in f["error_msg"] and dead in f["error_msg"]
        assert f["updated"] >= down["deadline"]
    assert probes >= 1              # the breaker kept probing (1 s cooldowns) while waiting


def test_wait_completes_when_the_endpoint_comes_back(gridxfer_home, tmp_path):
    from gridxfer.testbed.procs import terminate, tree
    from gridxfer.testbed.xrootd import start_xrootd

    port = closed_port()
    server_dir = Path(tempfile.mkdtemp(prefix="gridxfer-failfast-"))
    os.chmod(server_dir, 0o755)
    dest = f"root://127.0.0.1:{port}//data/back/"
    src, expected = sources(tmp_path, 4)
    spec = write_spec(tmp_path, "comeback", src, [dest],
                      "on_pool_down: {wait: 2m}\n"
                      "circuit_breaker: {cooldown: 1s, max_cooldown: 2s}\n")
    out: dict = {}

    def target() -> None:
        try:
            out["result"] = runner.run_campaign(spec)
        except BaseException as exc:        # surfaced by the test
            out["error"] = exc

    th = threading.Thread(target=target, daemon=True)
    th.start()
    server = None
    try:
        db = gridxfer_home / "campaigns" / "comeback.sqlite"
        deadline = time.time() + 60
        while time.time() < deadline:        # the pool is seen down first
            if db.exists():
                conn = journal(gridxfer_home, "comeback")
                try:
                    if events(conn, "pool_down"):
                        break
                except sqlite3.OperationalError:   # being created
                    pass
                finally:
                    conn.close()
            time.sleep(0.1)
        else:
            pytest.fail("the pool was never seen down")
        server = start_xrootd("comeback", server_dir, port=port)
        th.join(timeout=120)
        assert not th.is_alive() and "error" not in out, out
        res = out["result"]
        assert (res.state, res.files_done, res.files_failed) == ("done", 4, 0)
        for name, sum_ in expected.items():
            data = (server_dir / "data" / "back" / name).read_bytes()
            assert f"{zlib.adler32(data) & 0xFFFFFFFF:08x}" == sum_
        with journal(gridxfer_home, "comeback") as conn:
            assert events(conn, "pool_up")
            assert max(r[0] for r in conn.execute("SELECT attempts FROM files")) <= 2
    finally:
        if server is not None:
            terminate(tree(server.pid))
        shutil.rmtree(server_dir, ignore_errors=True)
