"""Failover on the embedded local grid (real XRootD servers, real movers):

- a destination server killed mid-campaign: the campaign completes on the remaining
  endpoints, no file is lost, and the killed endpoint is shown excluded with the reason;
- a destination whose filesystem fills up: new files stop going there and the campaign
  completes elsewhere.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import time
import zlib
from pathlib import Path

import pytest

from gridxfer.campaign import runner
from gridxfer.cli.main import main
from gridxfer.testbed.localgrid import ServerSpec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
MB = 1_000_000


def adler32(path: Path) -> str:
    return f"{zlib.adler32(Path(path).read_bytes()) & 0xFFFFFFFF:08x}"


def sources(tmp_path: Path, n: int, size: int) -> tuple[Path, dict[str, str]]:
    src = tmp_path / "src"
    src.mkdir()
    out = {}
    for i in range(n):
        p = src / f"f{i:03d}.dat"
        p.write_bytes(os.urandom(size))
        out[p.name] = adler32(p)
    return src, out


def write_spec(tmp_path: Path, name: str, src: Path, pool: list[str], **extra: str) -> Path:
    urls = ", ".join(f'"{u}{name}/"' for u in pool)
    text = (f"campaign: {name}\n"
            f"source: {{url: \"{src.as_uri()}/\", files: {{glob: \"*.dat\"}}}}\n"
            f"destinations:\n  - tier: T1\n    pool: [{urls}]\n    streams: 1\n"
            f"    max_active: {extra.get('max_active', '6')}\n"
            f"retries: {{max: 4, backoff: 0.3s}}\ntimeout: {extra.get('timeout', '60s')}\n")
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def journal(home: Path, name: str) -> sqlite3.Connection:
    conn = sqlite3.connect(home / "campaigns" / f"{name}.sqlite", timeout=10)
    conn.row_factory = sqlite3.Row
    return conn


def assert_nothing_lost(inv, home: Path, name: str, expected: dict[str, str]) -> list:
    with journal(home, name) as conn:
        rows = conn.execute("SELECT * FROM files ORDER BY id").fetchall()
    assert len(rows) == len(expected)
    assert {r["state"] for r in rows} == {"done"}, [dict(r) for r in rows if r["state"] != "done"]
    for r in rows:
        path = inv.local_path(r["dst_url"])
        assert path is not None and path.is_file(), r["dst_url"]
        assert adler32(path) == expected[r["name"]] == r["checksum"], r["dst_url"]
    return rows


def run_in_thread(spec: Path, **kw) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def target() -> None:
        try:
            out["result"] = runner.run_campaign(spec, **kw)
        except BaseException as exc:        # surfaced by the test
            out["error"] = exc

    th = threading.Thread(target=target, daemon=True)
    th.start()
    return th, out


def test_killed_destination_is_excluded_and_campaign_completes(make_grid, gridxfer_home,
                                                                tmp_path, capsys):
    inv = make_grid([ServerSpec(f"d{i}", "xrootd", "T1", throttle=4 * MB) for i in (1, 2, 3)])
    src, expected = sources(tmp_path, 48, 1 * MB)
    pool = [inv.endpoints[f"d{i}"].url for i in (1, 2, 3)]
    victim = pool[2] + "kill/"
    spec = write_spec(tmp_path, "kill", src, pool, timeout="15s")   # a file takes < 1 s here
    th, out = run_in_thread(spec, selector_name="throughput-aware")
    deadline = time.time() + 40
    db = gridxfer_home / "campaigns" / "kill.sqlite"
    while time.time() < deadline:            # kill d3 once it has written a couple of files
        if db.exists():
            conn = journal(gridxfer_home, "kill")
            try:
                n = conn.execute("SELECT count(*) FROM files WHERE state = 'done' AND "
                                 "endpoint = ?", (victim,)).fetchone()[0]
            except sqlite3.OperationalError:     # being created
                n = 0
            finally:
                conn.close()
            if n >= 2:
                break
        time.sleep(0.05)
    else:
        pytest.fail("d3 never completed a file")
    os.kill(inv.endpoints["d3"].pid, signal.SIGKILL)
    killed_at = time.time()
    th.join(timeout=90)
    assert not th.is_alive() and "error" not in out, out
    res = out["result"]
    assert (res.state, res.files_done, res.files_failed) == ("done", 48, 0)
    rows = assert_nothing_lost(inv, gridxfer_home, "kill", expected)
    assert sum(r["endpoint"] == victim for r in rows) >= 2        # done before the kill: kept
    with journal(gridxfer_home, "kill") as conn:
        late = conn.execute("SELECT count(*) FROM attempts WHERE endpoint = ? AND status = 'ok' "
                            "AND started > ?", (victim, killed_at)).fetchone()[0]
        failed = conn.execute("SELECT count(*) FROM attempts WHERE endpoint = ? AND "
                              "status = 'failed'", (victim,)).fetchone()[0]
        excluded = [json.loads(d) for (d,) in conn.execute(
            "SELECT detail FROM events WHERE kind = 'excluded'")]
    assert late == 0 and failed >= 1
    # excluded either by failures in a row or, if its transfers hang, as stalled
    assert any(e["url"] == victim and e["reason"].startswith("circuit open") for e in excluded)
    capsys.readouterr()
    assert main(["campaign", "status", "kill", "--links"]) == 0
    text = capsys.readouterr().out
    assert main(["campaign", "status", "kill", "--json"]) == 0
    name = json.loads(capsys.readouterr().out)["endpoints"][victim]     # its one name
    assert f"excluded T1 {name}: circuit open" in text, text
    assert main(["campaign", "status", "kill", "--links", "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert [e["url"] for e in st["status"]["excluded"]] == [victim]


def test_full_destination_stops_receiving_files(make_grid, gridxfer_home, tmp_path):
    inv = make_grid([ServerSpec("d1", "xrootd", "T1", throttle=4 * MB),
                     ServerSpec("d2", "xrootd", "T1", throttle=4 * MB),
                     ServerSpec("full", "xrootd", "T1", throttle=4 * MB, size_limit=6 * MB)])
    src, expected = sources(tmp_path, 40, 1 * MB)
    pool = [inv.endpoints[n].url for n in ("d1", "d2", "full")]
    full = pool[2] + "fill/"
    spec = write_spec(tmp_path, "fill", src, pool, max_active="4")
    res = runner.run_campaign(spec, selector_name="round-robin")   # the one that insists most
    assert (res.state, res.files_done, res.files_failed) == ("done", 40, 0)
    rows = assert_nothing_lost(inv, gridxfer_home, "fill", expected)
    on_full = sum(r["endpoint"] == full for r in rows)
    assert 1 <= on_full <= 6
    with journal(gridxfer_home, "fill") as conn:
        excluded = [(ts, json.loads(d)) for ts, d in conn.execute(
            "SELECT ts, detail FROM events WHERE kind = 'excluded'")]
        since = min((ts for ts, e in excluded if e["url"] == full
                     and e["reason"].startswith("no space")), default=None)
        assert since is not None, excluded          # seen full (space query or ENOSPC)
        after = conn.execute("SELECT status, error_class FROM attempts WHERE endpoint = ? "
                             "AND started > ?", (full, since)).fetchall()
        failed = conn.execute("SELECT count(*) FROM attempts WHERE endpoint = ? AND "
                              "status = 'failed'", (full,)).fetchone()[0]
    # The first exclusion is conservative: it counts the writes in flight in full (XRootD
    # reports a small upload's progress only at its end) plus the 1 MiB reserve, so a
    # reading after they land can show room for one more file, and the endpoint comes back
    # (seen once in ~20 runs, before and after the space-refresh change). A file sent there
    # after the first exclusion must then fit: a full endpoint that kept taking files would
    # fail them with NO_SPACE here.
    assert all(st == "ok" for st, _ in after), after
    assert failed <= 4                                  # at most the writes already under way
    # nothing partial left behind on the full filesystem
    data = Path(inv.endpoints["full"].data_dir) / "fill"
    assert {p.name for p in data.iterdir()} == {r["name"] for r in rows if r["endpoint"] == full}
