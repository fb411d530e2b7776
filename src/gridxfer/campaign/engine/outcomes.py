"""Finished attempts applied, as the dispatcher collects them: journal rows (into the
loop's ``ledger.Batch``), accounting, endpoint health for the exclusion policy, and the
retry decision (exponential backoff; NO_SPACE avoids the full endpoint, and gives up
once every endpoint of the pool is full; a failure while the campaign waits for a pool
that is down, ``on_pool_down: wait``, is not counted against the file)."""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from gridxfer.errors import ErrorClass
from gridxfer.movers.base import normalise_adler32
from gridxfer.campaign.engine.feed import PendingFeed
from gridxfer.campaign.engine.jobs import Job, Result
from gridxfer.campaign.engine.ledger import Batch
from gridxfer.campaign.engine.tapeflow import TapeFlow
from gridxfer.campaign.policy.selection import ExclusionPolicy
from gridxfer.campaign.engine.slots import LinkSlots
from gridxfer.campaign.spec.model import RetrySpec, TierSpec
from gridxfer.campaign.accounting.stats import Accounting

log = logging.getLogger(__name__)


def settle(results: list[Result], inflight: dict[int, Job], batch: Batch, *, slots: LinkSlots,
           acct: Accounting, exclusions: ExclusionPolicy, feed: PendingFeed,
           tiers: dict[str, TierSpec], retries: RetrySpec, stop: threading.Event,
           waiting: Callable[[str, float], bool] = lambda tier, when: False,
           tape: TapeFlow | None = None) -> None:
    """Apply ``results``; an attempt no longer in ``inflight`` (abandoned by the watchdog,
    already journalled) is ignored. A cancel counts as an attempt unless the campaign is
    stopping (``stop``): then the file goes back to pending as if never tried. A requeued
    job (``Result.requeue``: it never started) goes back to pending and to the feed. A
    copy to a tape-backed tier (``tape``) is not done yet: it waits for tape (archiving)."""
    b = batch
    att_rows, done_rows, pend_rows, fail_rows, cancel_rows = (
        b.att_rows, b.done_rows, b.pend_rows, b.fail_rows, b.cancel_rows)
    for res in results:
        job = inflight.pop(res.job.attempt_id, None)
        if job is None:         # an abandoned attempt answered after all: already journalled
            continue
        now = res.ended
        secs = max(1e-6, now - job.started)
        slots.finished(job.tier, secs)
        if res.outcome is not None:
            out = res.outcome
            rate = out.bytes / out.seconds if out.seconds > 0 else out.bytes / secs
            att_rows.append(("ok", now, out.bytes, rate, out.streams_used, out.mode,
                             None, None, None, job.attempt_id))      # temp renamed into place
            checksum = normalise_adler32(out.checksum) if out.checksum else None
            archiving = tape is not None and tape.archives(job.tier)
            if tape is not None and archiving:
                b.archive_rows.append((checksum, now, now, job.file_id))
                tape.copied(job.file_id, job.tier, job.dst_url, job.size, now)
            else:
                done_rows.append((checksum, now, job.file_id))
            acct.finish(job.flight, ok=True, nbytes=out.bytes, error_class=None,
                        outcome="archiving" if archiving else "done", now=now)
            if tape is not None:
                tape.finished(job.src_url, job.file_id)
            exclusions.record(job.endpoint, True, None, now)
            log.debug("done %s %s -> %s: %d bytes in %.3f s", job.tier, job.name, job.endpoint,
                      out.bytes, secs)
            continue
        ec = res.error_class or ErrorClass.OTHER
        if job.timed_out and ec in (ErrorClass.CANCELLED, ErrorClass.OTHER):
            ec = ErrorClass.TIMEOUT
        nbytes = job.flight.done
        if res.requeue or (ec is ErrorClass.CANCELLED and stop.is_set()):
            att_rows.append(("cancelled", now, nbytes, nbytes / secs, None, None, ec.value,
                             res.message, _left(job), job.attempt_id))
            cancel_rows.append((now, job.file_id))
            acct.finish(job.flight, ok=False, nbytes=nbytes, error_class=ec.value,
                        outcome="cancelled", now=now)
            if res.requeue:
                feed.retry_later(job.tier, 0.0, (      # at once: it was never tried
                    job.file_id, job.name, job.src_url, job.size, job.attempt_no - 1,
                    job.expected, job.avoid))
            continue
        if ec is ErrorClass.CANCELLED:
            ec = ErrorClass.OTHER
        exclusions.record(job.endpoint, False, ec.value, now)
        att_rows.append(("failed", now, nbytes, nbytes / secs, None, None, ec.value,
                         res.message, _left(job), job.attempt_id))
        avoid = job.avoid | {job.endpoint} if ec is ErrorClass.NO_SPACE else job.avoid
        free = ec.retryable and waiting(job.tier, now)    # the pool is down, not the file
        retry = free or (ec.retryable and job.attempt_no <= retries.max)
        if ec is ErrorClass.NO_SPACE and avoid >= set(tiers[job.tier].pool):
            retry = False
        if retry:
            n = job.attempt_no - 1 if free else job.attempt_no
            nb = now + retries.backoff * (2 ** max(0, n - 1))
            pend_rows.append((ec.value, res.message, nb, now, job.file_id))
            if free:
                cancel_rows.append((now, job.file_id))      # attempts - 1
            feed.retry_later(job.tier, nb, (
                job.file_id, job.name, job.src_url, job.size, n, job.expected, frozenset(avoid)))
            log.info("retry %s %s (attempt %d at %s): %s: %s", job.tier, job.name,
                     job.attempt_no, job.endpoint, ec.value, res.message)
        else:
            fail_rows.append((ec.value, res.message, now, job.file_id))
            if tape is not None:
                tape.finished(job.src_url, job.file_id)
            log.info("failed %s %s (attempt %d at %s): %s: %s", job.tier, job.name,
                     job.attempt_no, job.endpoint, ec.value, res.message)
        acct.finish(job.flight, ok=False, nbytes=nbytes, error_class=ec.value,
                    outcome="retry" if retry else "failed", now=now)


def _left(job: Job) -> str | None:
    """The temporary name a failed or cancelled attempt may have left: the mover removes
    it on failure, but that can fail too; ``resume`` sweeps what stays journalled. A job
    that never reached the mover created nothing."""
    return job.tmp_url if job.running else None
