"""bench.bulk: the warm-up pass before round 1."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from bench import bulk  # noqa: E402
from bench.common import Result  # noqa: E402


def test_warm_up_copies_once_per_protocol_in_use_with_a_peer_and_reports_failures(monkeypatch):
    calls = []

    def fake_one(tool, run, xrd, gsi, user, files, size, sub=None):
        calls.append((tool, sub))
        return Result(tool, 1.0, files, files * size) if tool == "xrdcp" else \
            Result(tool, 0.0, 0, 0, note="boom", ok=False)

    monkeypatch.setattr(bulk, "_one", fake_one)
    runners = {t: (lambda sub: 1.0) for t in bulk.TOOLS}
    failed = bulk.warm_up(runners, "X", "G", "u", 40, 1, list(bulk.TOOLS))
    assert calls == [("xrdcp", "warm-up"), ("gfal", "warm-up")]
    assert failed == ["gfal: boom"]
    calls.clear()
    assert bulk.warm_up(runners, "X", "G", "u", 40, 1, ["gx-root", "xrdcp"]) == []
    assert calls == [("xrdcp", "warm-up")]          # no gsiftp tool measured: not warmed


def test_davs_goals_compare_with_the_same_protocol_and_the_iperf3_ceiling():
    """issue 20: gx-davs against the best davs peer (not root's), gx-davs-tpc against the
    best HTTP-TPC peer, both against 0.98x the iperf3 ceiling of the same run."""
    from bench.bulk import render
    from bench.common import Result
    results = [Result("gx-root", 10.0, 4, 1000), Result("xrdcp", 5.0, 4, 1000),
               Result("gx-davs", 10.0, 4, 1000), Result("gfal-davs", 11.0, 4, 1000),
               Result("xrdcp-http", 12.0, 4, 1000),
               Result("gx-davs-tpc", 10.0, 4, 1000), Result("gfal-tpc", 9.0, 4, 1000),
               Result("iperf3", 9.9, 0, 1000)]
    _table, goals, _figs = render(results, 4, 250, link_rate=100.0)
    by = {g.label: g for g in goals}
    assert by["gx-davs >= 1.0x best davs peer (gfal-davs)"].met
    assert not by["gx-davs-tpc >= 1.0x best davs-tpc peer (gfal-tpc)"].met
    assert by["gx-davs >= 0.98x the iperf3 ceiling"].met       # 0.99x
    assert "gx-root >= 1.0x best peer (xrdcp)" in by
