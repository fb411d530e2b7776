"""check_gridxfer_tape through its real entry point (CTA text/JSON, dCache, rotation)."""
from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "monitoring"))
from monfixtures import cta_text, dcache_store, run_check  # noqa: E402

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "monitoring"
AT = "1795270000"          # the CTA fixtures end in the hour before this


def perf(out: str) -> dict[str, float]:
    return {m[0].strip("'"): float(m[1]) for m in re.findall(r"(\S+)=([-\d.]+)", out.split("|")[1])}


@pytest.mark.parametrize("fixture", ["cta-taped-4x18.log", "cta-taped-4x18.json"])
def test_four_drives_at_18_against_60_is_ok(fixture, gridxfer_home):
    r = run_check("tape", "--cta", str(FIX / fixture), "--at", AT, "-w", "60:", "-c", "40:")
    assert r.returncode == 0, r.stdout
    assert r.stdout.startswith("TAPE OK - 72.0 MB/s to tape from 4 drive(s) (18.0 MB/s per drive)")
    p = perf(r.stdout)
    assert p["write_MBps"] == 72.0 and p["drives"] == 4 and p["short_sessions"] == 1
    assert r.stdout.count("\n") == 1


def test_one_failed_session_is_not_a_drive_down(gridxfer_home):
    # CTA: status="failure" does not by itself make a drive unusable (the drive is put
    # down, or its session killed, when it is): the drive is reported, still counted
    r = run_check("tape", "--cta", str(FIX / "cta-taped-1-drive-failing.log"), "--at", AT,
                  "-w", "60:", "-c", "40:", "--drives-warning", "4:")
    assert r.returncode == 0, r.stdout
    assert "last session not successful on IBM-LTO9-04 (not down)" in r.stdout
    p = perf(r.stdout)
    assert p["drives"] == 4 and p["drives_down"] == 0 and p["drives_failing"] == 1
    assert p["failed_sessions"] == 1


def test_one_drive_killed_is_down_and_warning(gridxfer_home):
    # the kill is logged twice (the second line without status): once a failure, not a
    # success after it; the drive is down and left out of the rate
    r = run_check("tape", "--cta", str(FIX / "cta-taped-1-drive-killed.log"), "--at", AT,
                  "-w", "60:", "-c", "40:", "--drives-warning", "4:")
    assert r.returncode == 1, r.stdout
    assert r.stdout.startswith("TAPE WARNING - ")
    assert "1 drive(s) down (killed or put down): IBM-LTO9-04" in r.stdout
    p = perf(r.stdout)
    assert p["write_MBps"] == 54.0 and p["drives"] == 3 and p["drives_down"] == 1
    assert p["failed_sessions"] == 1


def test_min_volume_filter_changes_the_rate(gridxfer_home):
    # a 200 MB session at 2 MB/s on a fifth drive drags the per-drive rate down unfiltered
    r = run_check("tape", "--cta", str(FIX / "cta-taped-4x18.log"), "--at", AT,
                  "--min-volume", "0", "--no-state")
    p = perf(r.stdout)
    assert p["drives"] == 5 and p["per_drive_MBps"] == pytest.approx(14.8)
    assert p["short_sessions"] == 0


def test_rotation_and_resume_from_cookie(tmp_path, gridxfer_home):
    log = tmp_path / "cta-taped.log"
    now = time.time()
    lines = [cta_text(now - 3000 + 150 * i, f"D{i % 3}", f"V{i}", 2_000_000_000, 20.0)
             for i in range(12)]
    log.write_text("\n".join(lines[:4]) + "\n")
    args = ("--cta", str(log), "-W", "1h")
    assert perf(run_check("tape", *args).stdout)["sessions"] == 4
    with open(log, "a") as fh:                       # written just before the rotation
        fh.write("\n".join(lines[4:7]) + "\n")
    os.rename(log, tmp_path / "cta-taped.log.1")     # logrotate (create mode)
    log.write_text("\n".join(lines[7:10]) + "\n")
    r = run_check("tape", *args)
    assert perf(r.stdout)["sessions"] == 10, r.stdout   # nothing lost, nothing counted twice
    with open(log, "a") as fh:
        fh.write("\n".join(lines[10:]) + "\n")
    assert perf(run_check("tape", *args).stdout)["sessions"] == 12
    state = list((gridxfer_home / "checks").glob("tape-*.json"))
    assert len(state) == 1 and oct(state[0].stat().st_mode & 0o777)


def test_dcache_billing_store_records(tmp_path, gridxfer_home):
    now = time.time()
    day = time.strftime("%Y.%m.%d", time.localtime(now))
    billing = tmp_path / f"billing-{day}"
    recs = []
    for i in range(20):   # two pools, each flushing 1 GB files back to back at 25 MB/s
        end = now - 1000 + 40 * (i // 2)
        recs.append(dcache_store(end, f"pool{i % 2}", 1_000_000_000, 40_000))
    recs.append(dcache_store(now - 10, "pool1", 5_000_000_000, 100_000, rc=10006))  # failed
    recs.append(
        '11.21 13:45:01 [door:GFTP@dom:request] ["u":1:1:h] [0000AB,1] [/x] a@osm 1 0 {0:""}'
    )
    billing.write_text("\n".join(recs) + "\n")
    r = run_check("tape", "--dcache", str(billing), "-W", "30m", "--min-volume", "500MB",
                  "-w", "40:", "--per-drive")
    assert r.returncode == 0, r.stdout
    p = perf(r.stdout)
    assert p["write_MBps"] == pytest.approx(50.0, rel=0.02)
    assert p["drives"] == 2 and p["drive_pool0_MBps"] == pytest.approx(25.0, rel=0.02)


def test_jsonl_source_and_empty_window(tmp_path, gridxfer_home):
    f = tmp_path / "tape.jsonl"
    now = time.time()
    f.write_text(f'{{"end": {now - 100}, "bytes": 3000000000, "rate_MBps": 30, "drive": "X"}}\n'
                 "not json\n")
    r = run_check("tape", "--jsonl", str(f), "-W", "10m", "-c", "20:")
    assert r.returncode == 0 and "1 unparsable line(s)" in r.stdout
    r = run_check("tape", "--jsonl", str(f), "-W", "10m", "-c", "20:", "--at", str(now + 3600),
                  "--no-state")
    assert r.returncode == 2 and "0.0 MB/s to tape from 0 drive(s)" in r.stdout
    r = run_check("tape", "--jsonl", str(f), "-W", "10m", "--at", str(now + 3600), "--idle", "ok",
                  "--no-state")
    assert r.returncode == 0 and "no tape sessions" in r.stdout
