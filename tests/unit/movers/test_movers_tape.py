"""movers/tape.py: the tape seam (states, bulk batches) and capabilities_of reporting it."""
from __future__ import annotations

from collections.abc import Sequence

import pytest

from gridxfer.movers.capabilities import capabilities_of
from gridxfer.movers.tape import MAX_BULK, Residency, TapeOps, TapeState, batches


class _Tape:
    def archive_status(self, urls: Sequence[str]) -> dict[str, TapeState]:
        return {u: TapeState(u, Residency.ON_TAPE) for u in urls}

    def bring_online(self, urls: Sequence[str], pin_lifetime_s: float,
                     timeout_s: float) -> str:
        return "rid"

    def stage_status(self, urls: Sequence[str],
                     request_id: str | None = None) -> dict[str, TapeState]:
        return {u: TapeState(u, Residency.TAPE_ONLY, requested=True) for u in urls}


class _Releasing(_Tape):
    def release(self, urls: Sequence[str], request_id: str | None = None) -> None:
        pass


class _HalfTape:                    # archive only: not the capability
    def archive_status(self, urls: Sequence[str]) -> dict[str, TapeState]:
        return {}


def test_capabilities_report_tape_ops_only_when_all_three_exist():
    caps = capabilities_of(_Tape())
    assert isinstance(caps.tape, TapeOps) and caps.release is None
    assert caps.tape.archive_status(["u"])["u"].on_tape
    assert capabilities_of(_HalfTape()).tape is None
    assert capabilities_of(object()).tape is None
    assert capabilities_of(_Releasing()).release is not None


@pytest.mark.parametrize("residency,on_tape,online", [
    (Residency.DISK_ONLY, False, True), (Residency.ON_TAPE, True, True),
    (Residency.TAPE_ONLY, True, False), (Residency.MISSING, False, False),
    (Residency.ERROR, False, False)])
def test_state_on_tape_and_online(residency, on_tape, online):
    state = TapeState("root://h//f", residency)
    assert (state.on_tape, state.online) == (on_tape, online)


def test_batches_are_bulk_sized_and_keep_order():
    urls = [f"root://h//f{i}" for i in range(2 * MAX_BULK + 1)]
    got = list(batches(urls))
    assert [len(b) for b in got] == [MAX_BULK, MAX_BULK, 1]
    assert [u for b in got for u in b] == urls
    assert list(batches([])) == []
    with pytest.raises(ValueError):
        list(batches(urls, 0))
