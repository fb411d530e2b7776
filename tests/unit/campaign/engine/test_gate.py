"""A link's gate (engine/workers.py): at most ``limit`` transfers inside, waiting ones let in
as others leave, a limit that moves either way, and a cancel that ends a wait."""
from __future__ import annotations

import threading
import time

from gridxfer.campaign.engine.workers import Gate
from gridxfer.movers.base import CancelFlag


def enter_in_thread(gate: Gate, cancel: CancelFlag | None = None):
    got: list[bool] = []
    th = threading.Thread(target=lambda: got.append(gate.enter(cancel or CancelFlag())))
    th.start()
    return th, got


def test_at_most_limit_inside_and_a_leave_lets_the_next_in():
    gate = Gate(2)
    assert gate.enter(CancelFlag()) and gate.enter(CancelFlag()) and gate.running == 2
    th, got = enter_in_thread(gate)
    th.join(0.3)
    assert th.is_alive() and got == []              # the third waits
    gate.leave()
    th.join(5)
    assert got == [True] and gate.running == 2


def test_a_lower_limit_is_kept_as_transfers_leave_and_a_higher_one_at_once():
    gate = Gate(3)
    for _ in range(3):
        assert gate.enter(CancelFlag())
    gate.set_limit(1)                               # 3 inside: 2 of them owe their slot
    gate.leave()
    gate.leave()
    th, got = enter_in_thread(gate)
    th.join(0.3)
    assert th.is_alive() and gate.running == 1      # 1 inside = the new limit: still waits
    gate.set_limit(2)
    th.join(5)
    assert got == [True] and gate.running == 2
    gate.set_limit(0)                               # both owe; nothing gets in
    gate.leave()
    gate.leave()
    gate.set_limit(1)
    assert gate.enter(CancelFlag()) and gate.running == 1
    th, got = enter_in_thread(gate)
    th.join(0.3)
    assert th.is_alive()
    gate.leave()
    th.join(5)
    assert got == [True]


def test_a_cancel_ends_the_wait_and_takes_no_slot():
    gate = Gate(1)
    assert gate.enter(CancelFlag())
    cancel = CancelFlag()
    th, got = enter_in_thread(gate, cancel)
    time.sleep(0.05)
    cancel.set()
    th.join(5)
    assert got == [False] and gate.running == 1
    gate.leave()
    assert gate.enter(CancelFlag())                 # the slot was not lost


def test_many_threads_never_exceed_the_limit():
    gate, inside, peak, lock = Gate(4), [0], [0], threading.Lock()

    def work():
        for _ in range(50):
            assert gate.enter(CancelFlag())
            with lock:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
            with lock:
                inside[0] -= 1
            gate.leave()

    threads = [threading.Thread(target=work) for _ in range(16)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    assert peak[0] <= 4 and inside[0] == 0 and gate.running == 0
