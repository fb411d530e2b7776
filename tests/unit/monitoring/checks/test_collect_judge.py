"""The checks keep nagiosplugin's stages apart: the resource collects (a reading and
metrics), contexts judge (idle is a state, not a metric name), the summary writes the
line, and the baseline is saved after evaluation, not by the probe."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import nagiosplugin

FIX = Path(__file__).resolve().parents[3] / "fixtures"
sys.path.insert(0, str(FIX / "monitoring"))
from monfixtures import make_journal, steady_attempts  # noqa: E402

from gridxfer.monitoring.checks import tape, throughput  # noqa: E402

T0 = 1_795_260_000.0
LABEL = re.compile(r"^[A-Za-z0-9_.:/-]+$")


def journal(tmp: Path) -> Path:
    return make_journal(tmp / "c.sqlite", steady_attempts(T0, T0 + 600, 50e6, "root://se1//d"))


def run(check: nagiosplugin.Check) -> tuple[str, list[str]]:
    check()
    return check.summary_str, check.perfdata


def test_the_probe_does_not_save_the_baseline_the_check_does_after_judging(tmp_path,
                                                                           gridxfer_home):
    state = tmp_path / "baseline.json"
    args = throughput.build_parser().parse_args(
        ["-J", str(journal(tmp_path)), "--at", str(T0 + 600), "--state-file", str(state)])
    res = throughput.Throughput(args)
    metrics = res.probe()
    assert [m.name for m in metrics][:4] == ["throughput_MBps", "transfers", "active", "failed"]
    assert not state.exists()                 # collecting wrote nothing
    check = throughput.build(args)
    line, _ = run(check)
    assert state.exists() and check.exitcode == 0
    assert "baseline learning 0/5" in line


def test_the_status_line_is_written_from_the_reading(tmp_path, gridxfer_home):
    args = throughput.build_parser().parse_args(
        ["-J", str(journal(tmp_path)), "--at", str(T0 + 600), "--baseline", "none"])
    check = throughput.build(args)
    line, perf = run(check)
    reading = check.resources[0].reading
    assert not hasattr(check.resources[0], "headline")
    assert line == throughput.describe(reading)
    assert line == "50.0 MB/s over 10m00s (c.sqlite, 60 transfers, 0 active)"
    assert "throughput_MBps=50.0;;;0" in perf


def test_idle_is_a_state_not_a_metric_name(tmp_path, gridxfer_home):
    args = throughput.build_parser().parse_args(
        ["-J", str(journal(tmp_path)), "--at", str(T0 + 90000), "--idle", "warning"])
    res = throughput.Throughput(args)
    assert all(LABEL.match(m.name) for m in res.probe())
    check = throughput.build(args)
    line, perf = run(check)
    assert check.exitcode == 1 and line == "no transfers in the last 10m00s (c.sqlite)"
    assert perf == ["throughput_MBps=0.0;;;0"]


def test_tape_idle_is_a_state_not_a_metric_name(tmp_path, gridxfer_home):
    log = FIX / "monitoring" / "cta-taped-4x18.log"
    args = tape.build_parser().parse_args(
        ["--cta", str(log), "--no-state", "--at", "1900000000", "--idle", "critical"])
    res = tape.Tape(args)
    assert all(LABEL.match(m.name) for m in res.probe())
    check = tape.build(args)
    line, perf = run(check)
    assert check.exitcode == 2 and line == "no tape sessions in the last 1h00m00s"
    assert perf == ["write_MBps=0;;;0"]


def test_an_unwritable_baseline_is_one_unknown_line_without_perfdata(tmp_path, gridxfer_home):
    statedir = tmp_path / "statedir"
    statedir.mkdir()
    args = throughput.build_parser().parse_args(
        ["-J", str(journal(tmp_path)), "--at", str(T0 + 600),
         "--state-file", str(tmp_path / "state.json")])
    # the state file turns into something it cannot write after the arguments were read
    # (a directory given as --state-file is refused up front: test_plugin_guidelines.py)
    args.state_file = statedir
    check = throughput.build(args)
    line, perf = run(check)
    assert check.exitcode == 3 and perf == []
    assert line.startswith(str(tmp_path)) and line.endswith(": Is a directory")
