"""Which servers get requests in flight together (movers/xrootd/pipeline.py)."""
from __future__ import annotations

import pytest

pytest.importorskip("XRootD")

from gridxfer.movers.xrootd import pipeline  # noqa: E402


def test_unknown_servers_are_far_and_measured_ones_by_their_open_latency(monkeypatch):
    monkeypatch.setattr(pipeline, "_latency", {})
    assert pipeline.far("root://a:1094")                # unknown: pipeline
    pipeline.observe("root://a:1094", 0.0004)           # loopback
    pipeline.observe("root://b:1094", 0.021)            # a 20 ms link
    assert not pipeline.far("root://a:1094") and pipeline.far("root://b:1094")
    pipeline.observe("root://a:1094", 0.015)            # a busy process: GIL waits
    assert not pipeline.far("root://a:1094")
    for _ in range(300):                                 # a path that got long, for good
        pipeline.observe("root://a:1094", 0.03)
    assert pipeline.far("root://a:1094")
