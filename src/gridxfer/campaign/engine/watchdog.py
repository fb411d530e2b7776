"""The backstop for transfers that do not end.

The mover enforces the campaign's timeout itself; this catches one that ignores it. Past
``timeout + GRACE`` a running transfer is cancelled; still running ``ABANDON_AFTER`` later,
it is given up: journalled as a timeout (its worker is written off and replaced by the
scheduler), and the not yet started jobs handed to the same worker go back to the queue. So
one hung call cannot stall a campaign.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from gridxfer.errors import ErrorClass
from gridxfer.campaign.engine.jobs import Job, Result

GRACE = 10.0                 # seconds past the campaign's timeout before the cancel
ABANDON_AFTER = 30.0         # seconds after the cancel before a hung transfer is given up


def overdue(jobs: Iterable[Job], timeout: float, now: float) -> list[Result]:
    """Cancel the running jobs past the timeout; return results for those to abandon."""
    limit = timeout + GRACE
    abandoned = []
    for job in jobs:
        if not job.running:     # waiting for a worker or a slot: not started, no clock
            continue
        if not job.timed_out and now - job.started > limit:
            job.timed_out = True
            job.cancel.set()
        elif job.timed_out and now - job.started > limit + ABANDON_AFTER:
            abandoned.append(Result(job, None, ErrorClass.TIMEOUT,
                                    f"no answer {limit + ABANDON_AFTER:.0f} s after start, "
                                    f"even after cancel; abandoned", now))
    return abandoned


def stranded(abandoned: Iterable[Result], inflight: Mapping[int, Job],
             now: float) -> list[Result]:
    """The not yet started jobs of the abandoned jobs' bundles: their worker is stuck, so
    they go back to the queue (not counted as attempts)."""
    out = []
    for r in abandoned:
        for mate in r.job.bundle or ():
            if mate is not r.job and not mate.running and mate.attempt_id in inflight:
                mate.cancel.set()       # should the stuck worker ever get to it
                out.append(Result(mate, None, ErrorClass.CANCELLED,
                                  "requeued: its worker is stuck in an abandoned transfer",
                                  now, requeue=True))
    return out
