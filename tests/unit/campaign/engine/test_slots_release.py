"""When a transfer gives its link slot back before it returns (engine/slots.py): a short
transfer on a far link at ``data_done`` (its close, or its checksum, crosses the link while
the next copy starts), never one on a near link (no lock a file on the loopback path);
the dispatcher is woken only for long ones (short ones have the next job in the gate)."""
from __future__ import annotations

import threading
import types

from gridxfer.campaign.engine import slots


def _in_slot(s: slots.LinkSlots, tier: str):
    """Run one job of ``tier`` in a thread; it calls data_done, then waits for ``go``.
    Returns (thread, go, called: data_done has returned, wakes)."""
    job = types.SimpleNamespace(tier=tier, cancel=threading.Event(), slot=None)
    go, called, wakes = threading.Event(), threading.Event(), []

    def work(data_done):
        data_done()
        called.set()
        go.wait(10)
        return "done"

    th = threading.Thread(target=s.run, args=(job, work, lambda: wakes.append(1)))
    th.start()
    assert called.wait(10)
    return th, go, wakes


def _typical(s: slots.LinkSlots, tier: str, seconds: float) -> None:
    for _ in range(50):                 # the EWMA settles on ``seconds``
        s.finished(tier, seconds)


def test_a_short_transfer_on_a_far_link_frees_its_slot_at_data_done():
    s = slots.LinkSlots(["FAR"])
    s.set_cap("FAR", 1)
    _typical(s, "FAR", 0.065)           # 4 KB over 20 ms with adler32: ~3 flights
    th, go, wakes = _in_slot(s, "FAR")
    try:
        assert s.running("FAR") == 1                # still counted, as verifying
        assert s._gates["FAR"].running == 0         # but out of the gate: the next may enter
        assert wakes == []                          # the next job waits in the gate already
    finally:
        go.set()
        th.join(10)
    assert s.running("FAR") == 0


def test_a_short_transfer_on_a_near_link_keeps_its_slot():
    s = slots.LinkSlots(["NEAR"])
    s.set_cap("NEAR", 1)
    _typical(s, "NEAR", 0.002)          # loopback
    th, go, wakes = _in_slot(s, "NEAR")
    try:
        assert s._gates["NEAR"].running == 1
        assert s.running("NEAR") == 1
    finally:
        go.set()
        th.join(10)
    assert s.running("NEAR") == 0


def test_a_long_transfer_frees_its_slot_and_wakes_the_dispatcher():
    s = slots.LinkSlots(["BULK"])
    s.set_cap("BULK", 1)
    _typical(s, "BULK", 30.0)
    th, go, wakes = _in_slot(s, "BULK")
    try:
        assert s._gates["BULK"].running == 0 and wakes == [1]
    finally:
        go.set()
        th.join(10)
    assert s.running("BULK") == 0
