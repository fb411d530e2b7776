"""Persisted throughput baselines (EWMA and per-hour-of-day)."""
from __future__ import annotations

import os
import stat

import pytest

from gridxfer.monitoring import baseline as bl

HOUR = 3600.0


def test_learning_then_reference(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    b = bl.Baseline()
    t = 1_800_000_000.0 - 1_800_000_000.0 % 86400      # midnight UTC
    for k in range(4):
        b = b.learn(t + k, 100.0)
    assert b.reference(t, "auto", min_samples=5) is None
    b = b.learn(t + 5, 100.0)
    assert b.reference(t, "auto", min_samples=5) == pytest.approx(100.0)
    # a drop (< 50% of the baseline) is not learnt
    dropped = b.learn(t + 6, 10.0)
    assert dropped.ewma == b.ewma
    # a modest change is learnt with weight alpha
    b2 = b.learn(t + 7, 80.0, alpha=0.1)
    assert b2.ewma.value == pytest.approx(100 - 0.1 * 20 if b.ewma.n >= 9 else
                                          100 + (80 - 100) / (b.ewma.n + 1))


def test_hourly_baseline_is_per_hour(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    t0 = 1_800_000_000.0 - 1_800_000_000.0 % 86400
    b = bl.Baseline()
    for day in range(6):
        b = b.learn(t0 + day * 86400 + 2 * HOUR, 500.0)     # busy at 02:00
        b = b.learn(t0 + day * 86400 + 14 * HOUR, 100.0)    # quiet at 14:00
    assert b.reference(t0 + 2 * HOUR, "hourly") == pytest.approx(500.0)
    assert b.reference(t0 + 14 * HOUR, "hourly") == pytest.approx(100.0)
    assert b.reference(t0 + 5 * HOUR, "hourly") is None      # never seen 05:00
    assert b.reference(t0 + 5 * HOUR, "auto") == pytest.approx(b.ewma.value)


def test_roundtrip_mode_and_damage(gridxfer_home, tmp_path):
    path = bl.state_path("throughput", "camp/one:x")
    assert path.parent == gridxfer_home / "checks" and "/" not in path.name[:-5]
    b = bl.Baseline().learn(1e9, 42.0)
    bl.save(path, b)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    loaded, note = bl.load(path)
    assert loaded == b and note is None
    for junk in ("{not json", "[]", '{"version": 2}',
                 '{"version": 1, "ewma": {"value": -1, "n": 1}}',
                 '{"version": 1, "hourly": {"25": {"value": 1, "n": 1}}}'):
        path.write_text(junk)
        loaded, note = bl.load(path)
        assert loaded == bl.Baseline() and "reset" in note
    assert bl.load(tmp_path / "missing.json") == (bl.Baseline(), None)
    assert bl.load(tmp_path)[1]            # a directory: unreadable, reset
