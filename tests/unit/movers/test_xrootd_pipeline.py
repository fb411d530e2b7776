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


def test_a_latch_opens_once_for_every_waiter_and_times_out_while_shut():
    import threading
    import time

    latch = pipeline.Latch()
    assert latch.wait(0.01) is False
    woke = []
    waiters = [threading.Thread(target=lambda: woke.append(latch.wait(10))) for _ in range(3)]
    for t in waiters:
        t.start()
    time.sleep(0.05)
    latch.set()
    latch.set()                                   # a second set is harmless
    for t in waiters:
        t.join(5)
    assert woke == [True, True, True]
    assert latch.wait(0) and latch.wait(0.01)      # stays open for later waits


def test_a_reply_that_never_comes_is_a_timeout_and_one_that_came_is_its_status():
    from gridxfer.errors import ErrorClass, TransferError
    from gridxfer.movers.base import TransferParams

    reply = pipeline.Reply()
    with pytest.raises(TransferError) as err:
        reply.wait(0.3, TransferParams(), "x")
    assert err.value.error_class is ErrorClass.TIMEOUT
    reply("status", b"data", None)
    assert reply.wait(0.3, TransferParams(), "x") == "status" and reply.response == b"data"
