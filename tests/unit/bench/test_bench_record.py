"""bench.record and bench.summary: run records in bench/results/*.jsonl, what each benchmark
writes into them, and the repository's own BENCHMARKS.md and results files."""
from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from bench import record, summary  # noqa: E402
from bench.common import Result, best_of  # noqa: E402
from bench.record import REQUIRED, Goal  # noqa: E402


def _iso_utc(text: str) -> dt.date:
    """A record's date: ISO 8601 in UTC (``...Z``), or a date alone for old records."""
    if "T" not in text:
        return dt.date.fromisoformat(text)
    assert text.endswith("Z"), text
    return dt.datetime.fromisoformat(text[:-1] + "+00:00").date()


def test_write_record_appends_one_valid_json_line_per_run(tmp_path, capsys):
    goals = [Goal("dispatch >= 1000 files/s", 1234.5, 1000.0, unit=" files/s"),
             Goal("status < 1 s", 1.5, 1.0, unit=" s", at_most=True)]
    for k in range(2):
        path = record.write_record("scale", ".venv/bin/python -m bench.scale", directory=tmp_path,
                                   title="t", config={"files": 10 + k},
                                   figures={"rate": 1 / 3, "bad": float("nan"),
                                            "rounds": (1.0, None)},
                                   goals=goals, notes="a note" if k else "")
    assert path == tmp_path / "scale.jsonl"
    assert "recorded in" in capsys.readouterr().out
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    recs = [json.loads(line) for line in lines]          # each line on its own is JSON
    for rec in recs:
        assert set(REQUIRED) <= set(rec)
        assert rec["benchmark"] == "scale" and rec["command"] == ".venv/bin/python -m bench.scale"
        assert _iso_utc(rec["date"]) <= dt.datetime.now(dt.UTC).date()
        assert {"hostname", "cpus", "kernel", "load"} <= set(rec["machine"])
        assert rec["machine"]["cpus"] >= 1 and rec["machine"]["hostname"]
        assert rec["figures"] == {"rate": 0.3333, "bad": None, "rounds": [1.0, None]}
        assert rec["goals"][0] == {"goal": "dispatch >= 1000 files/s", "measured": 1234.5,
                                   "target": 1000.0, "unit": "files/s", "at_most": False,
                                   "met": True}
        assert rec["goals"][1]["met"] is False and rec["goals"][1]["at_most"] is True
    assert [r["config"]["files"] for r in recs] == [10, 11]
    assert "notes" not in recs[0] and recs[1]["notes"] == "a note"
    assert record.read_records(path) == recs


def test_append_record_refuses_a_record_without_the_required_keys(tmp_path):
    rec = record.make_record("bulk", "cmd", config={}, figures={}, goals=[])
    del rec["commit"]
    with pytest.raises(ValueError, match="commit"):
        record.append_record(rec, tmp_path)
    assert not (tmp_path / "bulk.jsonl").exists()
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"benchmark": "x"}\n')
    with pytest.raises(ValueError, match="x.jsonl:1"):
        record.read_records(bad)
    bad.write_text("not json\n")
    with pytest.raises(ValueError, match="x.jsonl:1: not JSON"):
        record.read_records(bad)


def test_goal_lines_as_the_benchmarks_print_them():
    assert Goal("g", 0.996, 1.0, unit="x").line() == \
        "GOAL NOT MET: g (measured 0.996x, goal 1x: 0.4 % below)"
    assert Goal("p", 45.0, 30.0, unit=" s", at_most=True).line() == \
        "GOAL NOT MET: p (measured 45 s, goal 30 s: 50.0 % above)"
    assert Goal("d", 9594.0, 1000.0, unit=" files/s").line() == \
        "GOAL MET: d (measured 9,594 files/s, goal 1,000 files/s)"


def test_code_version_names_the_commit_and_uncommitted_code(tmp_path):
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "m.py").write_text("x = 1\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "c"], check=True)
    head = subprocess.run(git[:3] + ["rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    assert record.code_version(repo) == (head, False)
    (repo / "notes.txt").write_text("not code\n")
    assert record.code_version(repo) == (head, False)
    (repo / "src" / "m.py").write_text("x = 2\n")
    assert record.code_version(repo) == (head, True)
    assert record.code_version(tmp_path / "nowhere") == (None, False)
    rec = record.make_record("bulk", "cmd", config={}, figures={}, goals=[],
                             code=("abc1234", True))
    assert (rec["commit"], rec["uncommitted"]) == ("abc1234", True)


# ---------------------------------------------------------------- what each benchmark writes
def _json_roundtrip(figures: dict) -> dict:
    rec = record.make_record("x", "cmd", config={}, figures=figures, goals=[])
    return json.loads(json.dumps(rec, allow_nan=False))["figures"]


def test_bulk_figures_keep_each_tools_rounds_best_median_and_ratios():
    from bench import bulk
    mb = 1_000_000
    results = [
        best_of([Result("gx-root", 4.0, 40, 400 * mb), Result("gx-root", 5.0, 40, 400 * mb),
                 Result("gx-root", 0.0, 0, 0, note="boom", ok=False)]),
        Result("gfal-root", 5.0, 40, 400 * mb),
        Result("xrdcp", 0.0, 0, 0, note="[3012] Program failed", ok=False),
        bulk.best_ceiling([Result(bulk.CEILING, 3.0, 0, 375 * mb),
                            Result(bulk.CEILING, 3.0, 0, 360 * mb)]),
    ]
    table, goals, figs = bulk.render(results, 40, 10 * mb, link_rate=125 * mb)
    by = {f["tool"]: f for f in _json_roundtrip({"tools": figs})["tools"]}
    gx = by["gx-root"]
    assert gx["rounds_s"] == [4.0, 5.0, None] and gx["best_s"] == 4.0 and gx["median_s"] == 4.5
    assert gx["mb_per_s"] == 100.0 and gx["x_best_peer"] == 1.25 and gx["pct_of_link"] == 80.0
    assert by["gfal-root"]["rounds_s"] == [5.0] and by["gfal-root"]["x_best_peer"] == 1.0
    assert by["xrdcp"]["ok"] is False and by["xrdcp"]["rounds_s"] == [None]
    assert "3012" in by["xrdcp"]["note"] and by["xrdcp"]["x_best_peer"] is None
    assert by["iperf3"]["rounds_mb_per_s"] == [125.0, 120.0] and by["iperf3"]["x_best_peer"] is None
    assert [(g.label, g.met) for g in goals] == [
        ("gx-root >= 1.0x best peer (gfal-root)", True),
        ("gx-root >= 95 % of the link rate", False)]
    assert "| gx-root " in table and "FAILED" in table


def test_smallfiles_figures_per_checksum_mode_and_the_posc_reference():
    from bench import smallfiles
    best = [Result("gridxfer", 2.0, 5000, 0), Result("xrdcp", 2.5, 5000, 0),
            Result("xrdcp-posc", 2.0, 5000, 0)]
    table, goals, refs, figs = smallfiles.render([(True, best), (False, best[:2])], 8)
    figs = _json_roundtrip({"tools": figs})["tools"]
    assert [(f["tool"], f["checksum"]) for f in figs] == [
        ("gridxfer", "adler32"), ("xrdcp", "adler32"), ("xrdcp-posc", "adler32"),
        ("gridxfer", "none"), ("xrdcp", "none")]
    assert figs[0]["files_per_s"] == 2500.0 and figs[0]["x_xrdcp"] == 1.25
    assert figs[0]["rounds_s"] == [2.0] and figs[0]["median_s"] == 2.0
    assert [g.met for g in goals] == [True, True, True, True]
    assert "checksum none" in goals[2].label and "by the medians" in goals[3].label
    # issue 21's goal is read from the medians: a best round alone does not meet it
    lucky = Result("gridxfer", 2.0, 5000, 0, rounds=(2.0, 2.3, 2.3), median=2.3)
    _, goals, _, _ = smallfiles.render([(False, [lucky, best[1]])], 8)
    assert [(g.met, round(g.measured, 3)) for g in goals] == [(True, 1.25), (False, 1.087)]
    assert refs == ["reference (not a goal): gridxfer = 1.00x xrdcp --posc, checksum adler32 "
                    "both ends (the same no-partial-file guarantee)"]


def test_scale_and_blackhole_render_their_figures_into_goals():
    from bench import blackhole_report as blackhole
    from bench import scale
    figs = dict(spec_load_s=0.002, expand_s=1.8, expand_entries_per_s=5.5e5, plan_s=9.5,
                plan_rows_per_s=1.05e5, plan_peak_rss_mb=43.0, journal_mb=368.0,
                scheduler_start_s=0.0, dispatch_files_per_s=9594.0, dispatch_files=287864,
                dispatch_s=30.0, dispatch_peak_rss_mb=30.0, status_ms=180.0, status_cli_ms=1297.0,
                help_cli_ms=58.0, report_ms=2109.0, report_attempts=287864, report_cli_ms=1902.0)
    table, goals = scale.render(figs, 1_000_000, 16)
    assert [g.met for g in goals] == [True, True, True, False]
    assert goals[0].measured == pytest.approx(9.502) and "9,594 files/s" in table

    mb = blackhole.MB
    rows = [blackhole.Row("rr-dns", "round-robin", "fixed", False, "done", 100.0, 600 * mb,
                          {"fast1": 40, "fast2": 40, "slow": 40}),
            blackhole.Row("ta", "throughput-aware", "fixed", True, "done", 14.0, 600 * mb,
                          {"fast1": 57, "fast2": 60, "slow": 3}),
            blackhole.Row("ta-a", "throughput-aware", "adaptive", True, "done", 15.0, 600 * mb,
                          {"fast1": 58, "fast2": 56, "slow": 6}, ((0.0, 4, "start at 4"),))]
    args = argparse.Namespace(rate=20 * mb, slow_factor=10.0, files=120, size=5 * mb,
                              cap_sessions=3, cap_warmup=3.0, max_active=9)
    text, goals, figures, ok = blackhole.render(
        rows, {"fast1": 20 * mb, "fast2": 20 * mb, "slow": 2 * mb}, 600 * mb, args)
    figures = _json_roundtrip(figures)
    assert ok and [g.met for g in goals] == [True, True]
    assert figures["ideal_mb_per_s"] == 42.0 and figures["capacities_mb_per_s"]["slow"] == 2.0
    assert figures["rows"][0]["exclusions"] is False and figures["rows"][1]["files"]["slow"] == 3
    assert figures["rows"][0]["x_dns_round_robin"] == 1.0
    assert figures["rows"][1]["x_dns_round_robin"] == pytest.approx(7.1429)
    assert figures["decisions"] == [[0.0, 4, "start at 4"]]
    assert "GOAL MET: throughput-aware >= 1.5x round-robin (DNS alias)" in text


# ---------------------------------------------------------------- the summary
def test_summary_shows_the_latest_record_of_the_suite_command(tmp_path):
    def rec(date, command, measured):
        return {"benchmark": "bulk", "date": date, "commit": "c" + date[-3:-1], "machine": {},
                "command": command, "config": {}, "figures": {},
                "goals": [{"goal": "gx >= 1.0x", "measured": measured, "target": 1.0,
                           "unit": "x", "at_most": False, "met": measured >= 1.0}]}
    suite_cmd = ".venv/bin/python -m bench.bulk --rounds 3"
    with open(tmp_path / "bulk.jsonl", "w") as fh:
        for r in (rec("2026-01-01T10:00:00Z", suite_cmd, 0.9),
                  rec("2026-01-02T10:00:00Z", suite_cmd, 1.2),
                  rec("2026-01-03T10:00:00Z", "other", 0.5)):
            fh.write(json.dumps(r) + "\n")
    entry = argparse.Namespace(name="bulk", command=suite_cmd)
    out = summary.render(tmp_path, [entry])
    assert "2026-01-02T10:00:00Z" in out and "| gx >= 1.0x | 1.2x | 1x | 1.20 | met |" in out
    assert "0.5x" not in out and "3 records" in out
    out = summary.render(tmp_path, [])                  # no suite entry: the latest of each command
    assert "0.5x" in out and "1.2x" in out and "0.9x" not in out
    assert summary.margin({"measured": 0.25, "target": 1.0, "at_most": True}) == 4.0
    assert summary.margin({"measured": 45.0, "target": 30.0, "at_most": True}) < 1


# ---------------------------------------------------------------- the repository's files
def test_benchmarks_md_stays_one_screen_and_every_results_line_parses():
    assert (ROOT / "BENCHMARKS.md").stat().st_size < 15 * 1024
    assert len((ROOT / "BENCHMARKS.md").read_text().splitlines()) <= 60, "one screen"
    files = sorted((ROOT / "bench" / "results").glob("*.jsonl"))
    from bench.__main__ import SUITE
    # every record file belongs to a benchmark of the suite (a new entry has no file until
    # its first `make bench` run, so the converse is not required)
    assert {p.stem for p in files} <= {e.name for e in SUITE} | {"netbench"}
    for path in files:
        lines = path.read_text(encoding="utf-8").splitlines()
        assert lines, path
        for n, line in enumerate(lines, 1):
            rec = json.loads(line)                 # a bad line fails here, naming no more
            where = f"{path.name}:{n}"
            assert set(REQUIRED) <= set(rec), where
            assert rec["benchmark"] == path.stem, where
            _iso_utc(rec["date"])
            assert isinstance(rec["goals"], list) and rec["command"], where
            for g in rec["goals"]:
                assert {"goal", "measured", "target", "met"} <= set(g), where


def test_smallwan_davs_rows_are_a_reference_against_gfal_copy_not_a_goal():
    from bench import smallwan_goals
    res = {("4KB", False): {"gx-davs-32": Result("gx-davs-32", 4.0, 2000, 0, median=4.0),
                            "gfal-davs-32": Result("gfal-davs-32", 6.0, 2000, 0, median=6.0)},
           ("4KB", True): {"gx-32": Result("gx-32", 2.0, 2000, 0, median=2.0)}}
    assert smallwan_goals.davs_references(res) == [
        "reference (not a goal): 4KB, checksum none: gx-davs-32 = 1.50x gfal-copy "
        "(32 processes), by the medians"]
    assert smallwan_goals.goals_of(res, []) == []   # no xrdcp-32 peer: no goal
