"""The backstop for transfers that do not end.

The mover enforces the campaign's timeout itself; this catches one that ignores it. Past
``timeout + GRACE`` a running transfer is cancelled; still running ``ABANDON_AFTER`` later,
it is given up: journalled as a timeout (its worker is written off and replaced by the
scheduler), and the not yet started jobs handed to the same worker go back to the queue. So
one hung call cannot stall a campaign. On a stop (Ctrl-C, SIGTERM) ``wind_down`` cancels
what is in flight and waits for it a bounded time.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping

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


def wind_down(inflight: dict[int, Job], *, drain: Callable[[float], None],
              clock: Callable[[], float], grace: float, hurry: threading.Event,
              write_off: Callable[[list[Job]], None]) -> list[Job]:
    """A stop: cancel every job in flight and collect results (``drain``) for up to
    ``grace`` s, not after a second Ctrl-C (``hurry``). The jobs still there are written
    off and returned. A running one is dropped from ``inflight``: it may go on writing, or
    close a POSC file under its final name, until the process ends, so its attempt and
    file stay 'active' and the next resume settles them as after a kill -9 (temp removed,
    the destination verified or deleted). Those still waiting for a slot never started
    and stay in ``inflight`` for the caller to put back."""
    for job in inflight.values():
        job.cancel.set()
    deadline = clock() + grace
    while inflight and clock() < deadline and not hurry.is_set():
        drain(0.1)
    drain(0.0)                              # what ended meanwhile is not stuck
    stuck = list(inflight.values())
    write_off(stuck)
    for job in stuck:
        if job.running:
            del inflight[job.attempt_id]
    return stuck
