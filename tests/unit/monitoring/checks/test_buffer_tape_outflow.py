"""check_gridxfer_buffer with a campaign's inflow to its tape-backed tier and the tape
outflow that campaign's journal saw (--outflow-campaign, --tier): time-to-full from both,
the expected figures computed here from the rows written."""
from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "fixtures" / "monitoring"))
from monfixtures import make_journal, run_check, steady_attempts  # noqa: E402

from gridxfer.campaign.journal import store as jr  # noqa: E402

MB = 1_000_000


def perf(out: str) -> dict[str, float]:
    return {m[0].strip("'"): float(m[1]) for m in re.findall(r"(\S+)=([-\d.]+)", out.split("|")[1])}


def test_time_to_full_from_the_campaigns_inflow_and_its_tape_outflow(tmp_path, gridxfer_home):
    now = time.time()
    buf = tmp_path / "buffer"
    buf.mkdir()
    (buf / "f").write_bytes(b"\0" * (40 * MB))                       # 40 of 100 MB used
    (gridxfer_home / "campaigns").mkdir()
    db = gridxfer_home / "campaigns" / "c1.sqlite"
    make_journal(db, steady_attempts(now - 2000, now - 0.5, 3 * MB, "root://t1-tape"))  # 3 MB/s
    conn = jr.connect(db)
    on_tape = [(f"t{k}", 100 * MB, "T1", now - 100 - 60 * k) for k in range(9)]   # 900 MB
    on_tape += [("old", 500 * MB, "T1", now - 2000),                 # before the window
                ("disk", 500 * MB, "T2", now - 50)]                   # another tier
    for name, size, tier, when in on_tape:
        conn.execute("INSERT INTO files (name, src_url, size, tier, state, copied, on_tape) "
                     "VALUES (?, ?, ?, ?, 'done', ?, ?)", (name, f"root://s/{name}", size, tier,
                                                          when - 30, when))
    conn.close()
    r = run_check("buffer", "-p", str(buf), "--capacity", "100MB", "--inflow-campaign", "c1",
                  "--outflow-campaign", "c1", "--tier", "T1", "-W", "15m")
    p = perf(r.stdout)
    assert p["inflow_MBps"] == pytest.approx(3.0, rel=0.01)
    assert p["outflow_MBps"] == pytest.approx(900 / 900, rel=0.01)   # 900 MB in 15 min
    assert p["time_to_full_s"] == pytest.approx(60 / 2, rel=0.02)   # 60 MB free at 2 MB/s net
    assert r.returncode == 2 and r.stdout.startswith("BUFFER CRITICAL - full in 3"), r.stdout


def test_outflow_sources_exclude_each_other(tmp_path, gridxfer_home):
    r = run_check("buffer", "--used", "1MB", "--capacity", "2MB", "--inflow", "1MB/s",
                  "--outflow", "1MB/s", "--outflow-campaign", "c1")
    assert r.returncode == 3 and "exclude each other" in r.stdout + r.stderr
