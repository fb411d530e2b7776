"""digestgate: at most GRIDXFER_HTTP_DIGEST_SLOTS digests at once per HTTP server. What the
real XrdHttp does past its checksum job table (a 30 s hold) is measured in the bench
(docs/performance-notes.md, session 37); the davs copies that go through the gate:
tests/integration/test_davs_movers.py."""
from __future__ import annotations

import contextlib
import threading

import pytest

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.gfal import digestgate


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setenv("GRIDXFER_HTTP_DIGEST_SLOTS", "3")
    digestgate.reset()
    yield
    digestgate.reset()


def test_a_server_has_as_many_slots_as_the_variable_says():
    url = "davs://se.example:1094/data/f"
    with contextlib.ExitStack() as held:
        for _ in range(3):
            held.enter_context(digestgate.held(url, wait=0.01))
        with pytest.raises(TransferError) as err, digestgate.held(url, wait=0.05):
            pass
        assert err.value.error_class == ErrorClass.TIMEOUT
        assert "no checksum slot came free" in str(err.value)
        assert "se.example:1094" in str(err.value)
    with digestgate.held(url, wait=0.01):       # released: free again
        pass


def test_each_server_has_its_own_slots_and_one_server_is_one_gate():
    with contextlib.ExitStack() as held:
        for _ in range(3):
            held.enter_context(digestgate.held("davs://a.example:1094/x", wait=0.01))
        with digestgate.held("https://b.example/x", wait=0.01):   # another server: free
            pass
        # the same server named with another case, user or path: the same gate, full
        with pytest.raises(TransferError), \
                digestgate.held("davs://someone@A.example:1094/other/y", wait=0.05):
            pass


def test_a_slot_is_given_back_when_the_digest_fails():
    url = "davs://se.example/f"
    for _ in range(5):
        with pytest.raises(RuntimeError), digestgate.held(url, wait=0.01):
            raise RuntimeError("the server answered 500")
    with contextlib.ExitStack() as held:
        for _ in range(3):
            held.enter_context(digestgate.held(url, wait=0.01))


def test_threads_never_hold_more_slots_than_there_are():
    url = "davs://se.example/f"
    inside, most, lock = [0], [0], threading.Lock()
    start = threading.Barrier(12)

    def digest() -> None:
        start.wait()
        for _ in range(20):
            with digestgate.held(url, wait=30):
                with lock:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                threading.Event().wait(0.001)
                with lock:
                    inside[0] -= 1

    threads = [threading.Thread(target=digest) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert 1 <= most[0] <= 3


@pytest.mark.parametrize("value, slots", [("1", 1), ("0", 1), ("-4", 1), ("12", 12),
                                          ("four", digestgate.DEFAULT_SLOTS),
                                          ("", digestgate.DEFAULT_SLOTS)])
def test_the_variable_is_read_with_a_floor_of_one_and_a_default(monkeypatch, value, slots):
    monkeypatch.setenv("GRIDXFER_HTTP_DIGEST_SLOTS", value)
    assert digestgate.slots() == slots


def test_the_default_is_xrootds_own_job_limit(monkeypatch):
    monkeypatch.delenv("GRIDXFER_HTTP_DIGEST_SLOTS")
    assert digestgate.slots() == digestgate.DEFAULT_SLOTS == 4
