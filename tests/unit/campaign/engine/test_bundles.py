"""A worker's bundle in one mover call (engine/bundles.py): each job keeps the Result
``run_attempt`` would give it, with its own times; the scheduler sends bundles of short
transfers there when the mover has ``copy_many``, one copy at a time otherwise."""
from __future__ import annotations

import pytest

from gridxfer.campaign.engine import bundles
from gridxfer.campaign.engine.attempt import run_attempt
from gridxfer.campaign.engine.jobs import Job
from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import CancelFlag, Copied
from tests.unit.campaign.engine.test_scheduler import (FakeMover, make_spec, plan, run,
                                                       states)

SRC = "root://src.invalid:1//s/"
DST = "root://a.invalid:1//d/"


class ManyMover(FakeMover):
    """FakeMover with copy_many: each copy scripted as ``copy``, 5 ms apart in the call."""

    def __init__(self, *a, boom: bool = False, **kw) -> None:
        super().__init__(*a, **kw)
        self.bundles: list[int] = []
        self.stops: list[bool] = []
        self.boom = boom

    def copy_many(self, jobs, stop=None):
        if self.boom:
            raise RuntimeError("mover bug")
        self.bundles.append(len(jobs))
        self.stops.append(bool(stop is not None and stop.is_set()))
        out = []
        for k, (src, dst, params) in enumerate(jobs):
            try:
                out.append(Copied(self.copy(src, dst, params=params), None, 0.005 * k,
                                  0.005 * k + 0.004))
            except TransferError as exc:
                out.append(Copied(None, exc, 0.005 * k, 0.005 * k + 0.004))
        return out


def job(i: int, name: str | None = None, src: str | None = None,
        expected: str | None = None) -> Job:
    name = name or f"f{i}"
    return Job(i, i, "T0", name, src or SRC + name, DST + name, DST, 100, 1, expected,
               frozenset(), 0.0, None)


def test_each_job_keeps_its_own_result_and_times():
    spec = make_spec()
    tier = spec.destinations[0]
    mover = ManyMover(script={"rule": lambda s, d, n: ErrorClass.NO_SPACE if "f2" in s
                              else "00000002" if "f3" in s else None})
    refused, bad = job(1), job(4, src=SRC + "other")
    refused.refusal = "token lacks storage.create"
    jobs = [job(0), refused, job(2), job(3, expected="00000003"), bad, job(5)]
    clock = iter(range(100, 200)).__next__
    res = bundles.run_bundle(jobs, spec, tier, mover, mover.copy_many, lambda url: mover,
                             lambda: float(clock()))
    assert [r.job for r in res] == jobs
    assert [r.error_class for r in res] == [None, ErrorClass.AUTH, ErrorClass.NO_SPACE,
                                            ErrorClass.CHECKSUM, ErrorClass.BAD_NAME, None]
    assert mover.bundles == [4]                 # refused and bad name never reached it
    assert mover.unlinked == [DST + "f3"]       # the catalogue's adler32 differed
    assert "expected 00000003" in res[3].message
    # f0 and f5: first and fourth in the mover's call (5 ms apart, 4 ms each), from the
    # clock's reading before it
    t0 = res[0].job.started
    assert res[5].job.started - t0 == pytest.approx(0.015)
    assert res[0].ended - t0 == pytest.approx(0.004)
    assert res[5].ended - res[5].job.started == pytest.approx(0.004)
    assert all(p.source_base == SRC for p in mover.params)


def test_a_mover_bug_fails_the_jobs_it_was_given_and_keeps_the_others():
    spec = make_spec()
    mover = ManyMover(boom=True)
    refused = job(1)
    refused.refusal = "no scope"
    res = bundles.run_bundle([job(0), refused, job(2)], spec, spec.destinations[0], mover,
                             mover.copy_many, lambda url: mover, lambda: 1.0)
    assert [r.error_class for r in res] == [ErrorClass.OTHER, ErrorClass.AUTH, ErrorClass.OTHER]
    assert "RuntimeError: mover bug" in res[0].message


def test_the_first_job_s_cancel_is_the_bundle_s_stop():
    spec = make_spec()
    mover = ManyMover()
    jobs = [job(0), job(1)]
    jobs[0].cancel = CancelFlag()
    jobs[0].cancel.set()
    bundles.run_bundle(jobs, spec, spec.destinations[0], mover, mover.copy_many,
                       lambda url: mover, lambda: 1.0)
    assert mover.stops == [True]


def test_a_mover_that_copies_many_gets_the_source_confined_in_copy_too():
    spec = make_spec()
    plain, many = FakeMover(), ManyMover()
    for mover in (plain, many):
        res = run_attempt(job(0), spec, spec.destinations[0], lambda s, d, m=mover: m,
                          lambda url: None, _Acct(), lambda: 1.0)
        assert res.error_class is None
    assert plain.params[0].source_base is None and many.params[0].source_base == SRC


class _Acct:
    def progress(self, flight, done):
        pass


@pytest.mark.parametrize("many", [True, False], ids=["copy_many", "copy"])
def test_the_scheduler_sends_bundles_of_short_transfers_in_one_call_where_it_can(
        gridxfer_home, many):
    """With ``copy_many``: bundles in one call, the sources confined by the mover; without
    it: one ``copy`` a file, the engine's own check."""
    spec = make_spec(max_active=2)
    conn = plan(spec, n=300)
    mover = ManyMover() if many else FakeMover()
    _, result = run(conn, spec, mover)
    assert result.state == "done" and states(conn) == {"done": 300}
    assert len(mover.calls) == 300                        # each file copied once
    if many:
        assert mover.bundles and max(mover.bundles) > 1   # bundles went in one call
    assert all(p.source_base == (SRC if many else None) for p in mover.params)


def test_copy_many_errors_are_the_copy_errors(gridxfer_home):
    spec = make_spec(max_active=2, retries=0)
    conn = plan(spec, n=60)
    mover = ManyMover(script={"rule": lambda s, d, n: ErrorClass.PERMISSION
                              if s.endswith("f7") else None})
    _, result = run(conn, spec, mover)
    assert states(conn) == {"done": 59, "failed": 1}
    row = conn.execute("SELECT error_class, error_msg FROM files WHERE name = 'f7'").fetchone()
    assert tuple(row) == ("permission", "scripted permission")

