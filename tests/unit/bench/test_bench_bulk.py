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
