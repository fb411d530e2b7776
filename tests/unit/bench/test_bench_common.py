"""bench.common: tables, goals, campaign files, data, copies check, best-of rounds."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from bench import common  # noqa: E402
from bench.common import (BenchError, Result, check_copies, goal_line, make_files,  # noqa: E402
                          md_table, ratio, run_timed, write_campaign)


def test_md_table_aligns_columns():
    text = md_table(["tool", "MB/s"], [["xrdcp", 123], ["gridxfer", 4.5]])
    lines = text.splitlines()
    assert lines[0] == "| tool     | MB/s |"
    assert lines[1] == "|----------|------|"
    assert lines[3] == "| gridxfer | 4.5  |"
    assert len({len(line) for line in lines}) == 1


def test_ratio_and_rates():
    assert ratio(50.0, 100.0) == 0.5
    assert ratio(1.0, 0.0) == 0.0
    r = Result("x", 2.0, 10, 4_000_000)
    assert r.files_per_s == 5.0 and r.bytes_per_s == 2_000_000.0
    assert Result("x", 0.0, 10, 10).files_per_s == 0.0


def test_goal_line_met_and_missed_by_how_much():
    assert goal_line("dispatch", 1500.0, 1000.0).startswith("GOAL MET: dispatch")
    missed = goal_line("ratio", 0.8, 1.0, unit="x")
    assert missed.startswith("GOAL NOT MET: ratio") and "20.0 % below" in missed
    over = goal_line("plan", 45.0, 30.0, higher_is_better=False, unit=" s")
    assert over.startswith("GOAL NOT MET") and "50.0 % above" in over
    assert goal_line("status", 0.5, 1.0, higher_is_better=False).startswith("GOAL MET")


def test_goal_line_does_not_round_a_shortfall_into_parity():
    line = goal_line("gx >= 1.0x best peer", 0.996, 1.0, unit="x")
    assert line.startswith("GOAL NOT MET") and "measured 0.996x" in line and "0.4 % below" in line
    assert "measured 1.004x" in goal_line("gx", 1.004, 1.0, unit="x")
    assert "measured 94.83 %" in goal_line("link", 94.83, 95.0, unit=" %")


def test_write_campaign_is_a_valid_spec_with_pinned_concurrency(tmp_path):
    from gridxfer.campaign.spec.schema import load_spec
    spec_path = write_campaign(tmp_path / "c.yaml", "bench-x", f"file://{tmp_path}/src/",
                               ["root://localhost:1094//data/d/"], streams=4, active=3,
                               checksum=False)
    spec = load_spec(spec_path)
    tier = spec.destinations[0]
    assert (tier.streams, tier.min_active, tier.max_active) == (4, 3, 3)
    assert spec.checksum.algorithm is None and spec.retries.max == 0
    spec2 = load_spec(write_campaign(tmp_path / "d.yaml", "bench-y", f"file://{tmp_path}/src/",
                                     ["gsiftp://localhost:2811/d/"], streams=1, active=8,
                                     checksum=True))
    assert spec2.checksum.algorithm == "adler32" and spec2.checksum.verify == "both"


def test_make_files_distinct_and_sized(tmp_path):
    files = make_files(tmp_path / "src", 3, 3 * (1 << 20) + 5)
    assert [p.stat().st_size for p in files] == [3 * (1 << 20) + 5] * 3
    heads = {p.read_bytes()[:32] for p in files}
    assert len(heads) == 3
    check_copies(tmp_path / "src", 3, 3 * (1 << 20) + 5)
    with pytest.raises(BenchError, match="3 files"):
        check_copies(tmp_path / "src", 4, 3 * (1 << 20) + 5)
    (files[0]).write_bytes(b"short")
    with pytest.raises(BenchError, match="wrong size"):
        check_copies(tmp_path / "src", 3, 3 * (1 << 20) + 5)


def test_run_timed_reports_failures_and_missing_tools():
    assert run_timed(["true"]) >= 0.0
    with pytest.raises(BenchError, match="exit 3"):
        run_timed([sys.executable, "-c", "print('boom'); raise SystemExit(3)"])
    with pytest.raises(BenchError, match="not installed"):
        run_timed(["no-such-tool-gridxfer-bench"])


def test_peak_rss_is_the_process_own_not_its_parents():
    """A child of a parent holding 200 MB must report its own peak (ru_maxrss would say
    >= 200 MB: Linux carries it across fork and exec)."""
    import subprocess
    root = str(Path(__file__).resolve().parents[3])
    code = (f"import sys; sys.path.insert(0, {root!r}); from bench import common; "
            "print(common.peak_rss())")
    big = bytearray(200 << 20)
    for i in range(0, len(big), 4096):
        big[i] = 1
    child = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               check=True).stdout)
    assert (1 << 20) < child < (150 << 20), child
    del big


def test_peak_rss():
    assert common.peak_rss() > 1 << 20


def test_scale_benchmark_end_to_end_small(capsys, monkeypatch, tmp_path):
    """bench.scale on 3,000 entries: plan, no-op dispatch, status and report all run, and
    the run's record is one JSON line with the command, the goals and every figure."""
    import functools
    import json

    from bench import record, scale
    from gridxfer.movers.base import Mover

    assert isinstance(scale.NoopMover(), Mover)
    results = tmp_path / "results"
    monkeypatch.setattr(scale, "write_record",
                        functools.partial(record.write_record, directory=results))
    rc = scale.main(["--files", "3000", "--dispatch-seconds", "1"])
    out = capsys.readouterr().out
    assert rc in (0, 1)
    assert "plan: expansion + journal" in out and "GOAL" in out
    dispatched = [line for line in out.splitlines() if line.startswith("| dispatch, no-op mover")]
    assert dispatched and " 0 files/s" not in dispatched[0]
    [line] = (results / "scale.jsonl").read_text().splitlines()
    rec = json.loads(line)
    assert rec["command"] == ".venv/bin/python -m bench.scale --files 3000 --dispatch-seconds 1"
    assert rec["config"] == {"files": 3000, "dispatch_seconds": 1.0, "max_active": 16}
    assert rec["figures"]["dispatch_files_per_s"] > 0 and rec["figures"]["report_attempts"] > 0
    assert None not in rec["figures"].values()
    assert [g["met"] for g in rec["goals"]] == [ln.startswith("GOAL MET") for ln in
                                                out.splitlines() if ln.startswith("GOAL")]
    monkeypatch.setattr(scale, "write_record", lambda *a, **k: pytest.fail("recorded"))
    assert scale.main(["--files", "300", "--dispatch-seconds", "0.2", "--no-record"]) in (0, 1)


def test_best_of_keeps_the_fastest_successful_run_and_lists_them_all():
    best_of = common.best_of
    runs = [Result("gx", 3.2, 10, 100), Result("gx", 0.0, 0, 0, note="boom", ok=False),
            Result("gx", 2.9, 10, 100)]
    best = best_of(runs)
    assert (best.seconds, best.ok, best.note) == (2.9, True,
                                                  "best of 3: 3.2/fail/2.9 s, median 3.05 s")
    assert (best.round_seconds, best.median_seconds) == ([3.2, None, 2.9], 3.05)
    odd = best_of(
        [Result("gx", 3.2, 10, 100), Result("gx", 2.9, 10, 100), Result("gx", 3.0, 10, 100)]
    )
    assert odd.note == "best of 3: 3.2/2.9/3.0 s, median 3.00 s"
    assert best_of(runs[:1]) is runs[0]                 # one run: as it was
    assert (runs[0].round_seconds, runs[0].median_seconds) == ([3.2], 3.2)
    assert (runs[1].round_seconds, runs[1].median_seconds) == ([None], None)
    failed = [Result("gx", 0.0, 0, 0, note="a", ok=False),
              Result("gx", 0.0, 0, 0, note="b", ok=False)]
    assert best_of(failed) is failed[-1]                # no success: the last failure


class _Parsed(Exception):
    pass


def test_make_bench_suite_arguments_are_accepted_by_each_benchmark(monkeypatch, capsys):
    """`make bench` runs bench.__main__.SUITE: every entry's arguments must parse in its
    module (stopped right after parsing, so nothing runs)."""
    import argparse
    import importlib

    from bench.__main__ import SUITE, main
    real = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        real(self, args, namespace)          # exits 2 on an argument the module rejects
        raise _Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    assert {e.name for e in SUITE} >= {"bulk", "bulk-wan", "smallfiles", "scale"}
    assert any("--wan" in e.argv and e.needs_netns for e in SUITE)
    for entry in SUITE:
        with pytest.raises(_Parsed):
            importlib.import_module(f"bench.{entry.module}").main(list(entry.argv))
    assert main(["no-such-bench"]) == 2
    assert "choose from" in capsys.readouterr().err


def test_children_run_this_checkout_installed_or_not(tmp_path):
    """bench.scale's children (and gridxfer_run's) import gridxfer and bench from this
    checkout wherever they start: REPO/src and REPO lead PYTHONPATH (was PYTHONPATH=REPO
    only: no gridxfer at all in a fresh clone, the venv's installed tree in a worktree)."""
    import subprocess
    from bench.common import PYTHON, child_env, gridxfer_cmd
    from bench.record import REPO
    env = child_env({"PYTHONPATH": "/elsewhere", "PATH": os.environ.get("PATH", "")})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(REPO / "src"), str(REPO), "/elsewhere"]
    out = subprocess.run([PYTHON, "-c", "import gridxfer, bench; print(gridxfer.__file__); "
                          "print(bench.__file__)"], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    gx, bench = out.stdout.split()
    assert gx == str(REPO / "src" / "gridxfer" / "__init__.py")
    assert bench == str(REPO / "bench" / "__init__.py")
    res = subprocess.run([*gridxfer_cmd(), "--version"], env=child_env(), cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr


def test_data_too_big_for_half_of_dev_shm_goes_to_disk():
    import tempfile
    assert common.shm_parent(1 << 50) == tempfile.gettempdir()      # 1 PiB: never in memory
