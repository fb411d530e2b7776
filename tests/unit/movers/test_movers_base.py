"""movers/base.py: CancelFlag behaves as the threading.Event it stands in for."""
from __future__ import annotations

import threading
import time

import pytest

from gridxfer.campaign.engine.jobs import Job
from gridxfer.movers.base import CancelFlag


def test_set_and_is_set():
    flag = CancelFlag()
    assert not flag.is_set()
    flag.set()
    assert flag.is_set()
    flag.set()                      # idempotent, like Event.set
    assert flag.is_set()


def test_wait_times_out_then_returns_at_once_once_set():
    flag = CancelFlag()
    t = time.monotonic()
    assert flag.wait(0.05) is False
    assert time.monotonic() - t >= 0.04
    flag.set()
    assert flag.wait(5) is True


@pytest.mark.parametrize("delay", [0.0, 0.02])
def test_wait_is_woken_by_set_from_another_thread(delay):
    flag = CancelFlag()
    woke = []

    def waiter():
        woke.append(flag.wait(5))

    th = threading.Thread(target=waiter)
    th.start()
    time.sleep(delay)
    t = time.monotonic()
    flag.set()
    th.join(5)
    assert woke == [True] and time.monotonic() - t < 2


def test_many_waiters_and_a_racing_set_never_miss_it():
    for _ in range(200):
        flag = CancelFlag()
        results = []
        waiters = [threading.Thread(target=lambda r=results, f=flag: r.append(f.wait(5)))
                   for _ in range(3)]
        for w in waiters:
            w.start()
        flag.set()
        for w in waiters:
            w.join(5)
        assert results == [True, True, True]


def test_each_job_gets_its_own_flag():
    a = Job(1, 1, "T", "a", "file:///a", "root://h//a", "root://h//", 1, 1, None,
            frozenset(), 0.0, None)
    b = Job(2, 2, "T", "b", "file:///b", "root://h//b", "root://h//", 1, 1, None,
            frozenset(), 0.0, None)
    a.cancel.set()
    assert a.cancel.is_set() and not b.cancel.is_set()
    assert isinstance(a.cancel, CancelFlag)


def test_token_pair_never_shows_its_values():
    from dataclasses import replace

    from gridxfer.movers.base import TokenPair, TransferParams
    pair = TokenPair(src="eyJhbGciOi.source-claims.sig-src", dst=None)
    params = replace(TransferParams(), tokens=pair)
    for text in (repr(pair), str(pair), repr(params), str(params)):
        assert "sig-src" not in text and "eyJ" not in text
    assert repr(pair) == "TokenPair(src=<token>, dst=None)"
    assert (pair.for_side("source"), pair.for_side("destination")) == (pair.src, None)
    assert params == TransferParams()       # tokens do not make two transfers differ
