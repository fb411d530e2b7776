"""check_gridxfer_buffer: fill %, time-to-full from inflow (journal) and outflow (tape)."""
from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "monitoring"))
from monfixtures import make_journal, run_check, steady_attempts  # noqa: E402

MB = 1_000_000


def perf(out: str) -> dict[str, float]:
    return {m[0].strip("'"): float(m[1]) for m in re.findall(r"(\S+)=([-\d.]+)", out.split("|")[1])}


@pytest.fixture
def buffer_dir(tmp_path):
    d = tmp_path / "buffer"
    d.mkdir()
    for i in range(4):
        (d / f"file{i}").write_bytes(b"\0" * (10 * MB))     # 40 MB used
    return d


def tape_jsonl(path: Path, total_bytes: int, now: float) -> Path:
    """Sessions well inside the last 15 min writing total_bytes."""
    n = 9
    path.write_text("".join(json.dumps({"end": now - 100 - 60 * k, "bytes": total_bytes // n,
                                        "duration": 30, "drive": f"D{k % 2}"}) + "\n"
                            for k in range(n)))
    return path


def test_time_to_full_is_correct_and_critical_before_full(tmp_path, buffer_dir, gridxfer_home):
    now = time.time()
    tape = tape_jsonl(tmp_path / "tape.jsonl", 900 * MB, now)     # 1 MB/s over 15 min
    (gridxfer_home / "campaigns").mkdir()
    make_journal(gridxfer_home / "campaigns" / "c1.sqlite",
                 steady_attempts(now - 2000, now - 0.5, 3 * MB, "root://buffer"))   # 3 MB/s in
    r = run_check("buffer", "-p", str(buffer_dir), "--capacity", "100MB",
                  "--inflow-campaign", "c1", "--jsonl", str(tape), "--min-volume", "0")
    p = perf(r.stdout)
    assert p["fill_pct"] == 40.0
    assert p["inflow_MBps"] == pytest.approx(3.0, rel=0.01)
    assert p["outflow_MBps"] == pytest.approx(1.0, rel=0.01)
    # 60 MB free, filling at 2 MB/s net: full in 30 s
    assert p["time_to_full_s"] == pytest.approx(30.0, rel=0.02)
    assert r.returncode == 2 and r.stdout.startswith("BUFFER CRITICAL - full in 3")
    assert "40.0% full" in r.stdout


def test_warning_band_and_not_filling(tmp_path, buffer_dir, gridxfer_home):
    # 60 MB free at 10 kB/s net: 6000 s = 1h40m -> between 1h (crit) and 4h (warn)
    r = run_check("buffer", "-p", str(buffer_dir), "--capacity", "100MB", "--inflow", "30kB/s",
                  "--outflow", "20kB/s")
    assert r.returncode == 1, r.stdout
    assert perf(r.stdout)["time_to_full_s"] == pytest.approx(6000.0)
    r = run_check("buffer", "-p", str(buffer_dir), "--capacity", "100MB", "--inflow", "1MB/s",
                  "--outflow", "60MB/s")
    assert r.returncode == 0 and "not filling" in r.stdout
    assert "time_to_full_s" not in perf(r.stdout)          # no sentinel (was 31536000)


def test_fill_thresholds_and_numbers(gridxfer_home):
    r = run_check("buffer", "--used", "95GB", "--capacity", "100GB", "--inflow", "0",
                  "--outflow", "0")
    assert r.returncode == 2 and "95.0% full" in r.stdout
    r = run_check("buffer", "--used", "85GB", "--capacity", "100GB", "--inflow", "0",
                  "--outflow", "0")
    assert r.returncode == 1


def test_statvfs_of_a_real_filesystem(tmp_path, gridxfer_home):
    r = run_check("buffer", "-p", str(tmp_path), "--inflow", "0", "--outflow", "0",
                  "-w", "100", "-c", "100")
    assert r.returncode == 0, r.stdout
    assert 0 < perf(r.stdout)["fill_pct"] < 100


def test_the_readme_example_works_as_written(tmp_path, buffer_dir, gridxfer_home):
    """README's check_gridxfer_buffer line, with only its paths pointed at fixtures: it
    judges the buffer (it answered UNKNOWN: no outflow source was given)."""
    import shlex
    import shutil
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    line = next(ln for ln in readme.splitlines() if ln.startswith("check_gridxfer_buffer "))
    argv = shlex.split(line.split("  #")[0])[1:]
    cta = tmp_path / "cta-taped.log"
    shutil.copy(Path(__file__).resolve().parents[1] / "fixtures" / "monitoring"
                / "cta-taped-4x18.log", cta)
    paths = {"/pool/buffer": str(buffer_dir), "/var/log/cta/cta-taped.log": str(cta)}
    argv = [paths.get(a, a) for a in argv]
    assert set(paths.values()) <= set(argv), line
    now = time.time()
    (gridxfer_home / "campaigns").mkdir()
    make_journal(gridxfer_home / "campaigns" / "sc-t0-t1.sqlite",
                 steady_attempts(now - 900, now - 0.5, 1 * MB, "root://buffer"))
    r = run_check("buffer", *argv)
    assert r.returncode in (0, 1, 2) and r.stdout.startswith("BUFFER "), r.stdout
    assert perf(r.stdout)["inflow_MBps"] == pytest.approx(1.0, rel=0.02)
