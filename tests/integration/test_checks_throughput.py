"""check_gridxfer_throughput: floor, baseline drop, idle handling, per-endpoint."""
from __future__ import annotations

import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "monitoring"))
from monfixtures import make_journal, run_check, steady_attempts  # noqa: E402

MB = 1_000_000


def perf(out: str) -> dict[str, float]:
    return {m[0].strip("'"): float(m[1]) for m in re.findall(r"(\S+)=([-\d.]+)", out.split("|")[1])}


def test_floor_and_endpoint_filter(gridxfer_home):
    now = time.time()
    (gridxfer_home / "campaigns").mkdir()
    make_journal(gridxfer_home / "campaigns" / "c1.sqlite",
                 steady_attempts(now - 900, now, 250 * MB, "root://se1")
                 + steady_attempts(now - 900, now, 50 * MB, "root://se2"))
    r = run_check("throughput", "-C", "c1", "-w", "200:", "-c", "100:", "--per-endpoint")
    assert r.returncode == 0, r.stdout
    p = perf(r.stdout)
    assert abs(p["throughput_MBps"] - 300) < 3 and abs(p["ep_se2_MBps"] - 50) < 1
    r = run_check("throughput", "-C", "c1", "-E", "root://se2", "-w", "200:", "-c", "100:")
    assert r.returncode == 2 and r.stdout.startswith("THROUGHPUT CRITICAL - throughput 49.")
    # every journal in $GRIDXFER_HOME when no campaign is named
    r = run_check("throughput", "-w", "200:", "--baseline", "none")
    assert r.returncode == 0 and "1 journal(s)" in r.stdout


def test_baseline_drop_after_learning(gridxfer_home):
    (gridxfer_home / "campaigns").mkdir()
    j = gridxfer_home / "campaigns" / "c2.sqlite"
    t0 = 1_800_000_000.0
    att = steady_attempts(t0, t0 + 3600, 100 * MB, "se")      # 100 MB/s for an hour
    att += steady_attempts(t0 + 3600, t0 + 7200, 40 * MB, "se")  # then 40 MB/s
    make_journal(j, att)
    args = ("-C", "c2", "-W", "5m", "--baseline-warning", "70:", "--baseline-critical", "30:")
    for k in range(6):      # learn on the first hour, one run every 5 min
        r = run_check("throughput", *args, "--at", str(t0 + 600 + 300 * k))
        assert r.returncode == 0, r.stdout
    assert "100% of auto baseline 100.0 MB/s" in r.stdout
    r = run_check("throughput", *args, "--at", str(t0 + 4200))
    assert r.returncode == 1, r.stdout
    assert "40% of auto baseline 100.0 MB/s" in r.stdout
    assert perf(r.stdout)["baseline_pct"] == 40.0
    # the drop was not learnt: still a warning next time
    r = run_check("throughput", *args, "--at", str(t0 + 4500))
    assert r.returncode == 1


def test_idle_window(gridxfer_home):
    (gridxfer_home / "campaigns").mkdir()
    make_journal(gridxfer_home / "campaigns" / "c3.sqlite", [(100, 200, 10 * MB, "se")])
    base = ("-C", "c3", "--at", "100000", "-c", "1:")
    assert run_check("throughput", *base).returncode == 2
    r = run_check("throughput", *base, "--idle", "ok")
    assert r.returncode == 0 and r.stdout.startswith("THROUGHPUT OK - no transfers")
    assert run_check("throughput", *base, "--idle", "unknown").returncode == 3


def test_per_endpoint_labels_are_short_stable_names(gridxfer_home):
    """Issue 22h: loopback endpoints with ephemeral ports (long URLs sharing their first 19
    characters) get short, unique labels: their journalled names, not cut URLs."""
    from gridxfer.campaign.journal import names, store
    now = time.time()
    (gridxfer_home / "campaigns").mkdir()
    urls = ["root://127.0.0.1:41463//data/long/path/to/the/campaign/area/",
            "root://127.0.0.1:55375//data/long/path/to/the/campaign/area/",
            "davs://127.0.0.1:41464/data/long/path/to/the/campaign/area/"]
    path = make_journal(gridxfer_home / "campaigns" / "c3.sqlite",
                        [a for u in urls for a in steady_attempts(now - 300, now, 10 * MB, u)])
    conn = store.connect(path)
    store.set_meta(conn, [names.meta_item({urls[0]: "t1a-xrd1"})])
    conn.close()
    r = run_check("throughput", "-C", "c3", "--per-endpoint", "--baseline", "none")
    labels = sorted(k for k in perf(r.stdout) if k.startswith("ep_"))
    assert labels == ["ep_127.0.0.1:41464_MBps", "ep_127.0.0.1:55375_MBps",
                      "ep_t1a-xrd1_MBps"], r.stdout
