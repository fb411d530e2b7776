"""One transfer attempt, as a worker thread runs it: mover call, destination checksum
check, and the error turned into a one-line ``Result`` (a mover bug never escapes). The
parts (``transfer_params``, ``judged``, ``failed``) are shared with ``bundles.py``, which
runs a worker's bundle in one mover call."""
from __future__ import annotations

import contextlib
from collections.abc import Callable

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers import names
from gridxfer.movers import tokens as tokens_mod
from gridxfer.movers.base import Mover, TransferOutcome, TransferParams, normalise_adler32
from gridxfer.movers.capabilities import capabilities_of
from gridxfer.movers.urls import scheme_of
from gridxfer.campaign.engine.jobs import Job, Result
from gridxfer.campaign.spec.schema import CampaignSpec, TierSpec
from gridxfer.campaign.accounting.stats import Accounting

_confining: dict[type, bool] = {}


def confines(mover: object) -> bool:
    """The mover resolves a local source's links itself where it opens the file
    (``CopiesMany``: ``TransferParams.source_base``); once per mover class."""
    kind = type(mover)
    if kind not in _confining:
        _confining[kind] = capabilities_of(mover).copy_many is not None
    return _confining[kind]


def run_attempt(job: Job, spec: CampaignSpec, tier: TierSpec,
                mover_for: Callable[[str, str], Mover], ops_for: Callable[[str], object | None],
                acct: Accounting, clock: Callable[[], float],
                on_data_done: Callable[[], None] | None = None) -> Result:
    """Copy ``job.src_url`` to ``job.dst_url``; never raises."""
    if job.refusal is not None:
        return refused(job, clock)
    with tokens_mod.using(job.tokens, job.src_url, job.dst_url):    # for ops_for's calls too
        return _attempt(job, spec, tier, mover_for, ops_for, acct, clock, on_data_done)


def refused(job: Job, clock: Callable[[], float]) -> Result:
    """A job whose token lacks a scope it needs (``Job.refusal``): an auth failure."""
    return Result(job, None, ErrorClass.AUTH, first_line(job.refusal or ""), clock())


def _attempt(job: Job, spec: CampaignSpec, tier: TierSpec,
             mover_for: Callable[[str, str], Mover], ops_for: Callable[[str], object | None],
             acct: Accounting, clock: Callable[[], float],
             on_data_done: Callable[[], None] | None) -> Result:
    mover: Mover | None = None
    try:
        mover = mover_for(job.src_url, job.dst_url)
        confined = confines(mover)
        names.check_transfer(job.name, spec.source.url, job.src_url, job.endpoint, job.dst_url,
                             source_confined=confined)
        params = transfer_params(job, spec, tier, mover, confined, on_data_done)
        flight = job.flight
        out = mover.copy(job.src_url, job.dst_url, params=params,
                         progress=lambda done, total: acct.progress(flight, done))
        return judged(job, out, params, ops_for, clock)
    except TransferError as exc:
        return failed(job, exc, mover is not None, ops_for, clock)
    except Exception as exc:        # a mover bug must not kill the campaign
        return crashed(job, exc, clock)


def transfer_params(job: Job, spec: CampaignSpec, tier: TierSpec, mover: Mover, confined: bool,
                    on_data_done: Callable[[], None] | None = None) -> TransferParams:
    return TransferParams(
        streams=tier.streams, tcp_buffer=tier.tcp_buffer, timeout=spec.timeout,
        checksum=spec.checksum.algorithm, expected_checksum=job.expected,
        verify=spec.checksum.verify if spec.checksum.algorithm else "none",
        overwrite=spec.overwrite, cancel=job.cancel,
        # TPC where this mover copies the pair server to server; streamed otherwise
        third_party=spec.third_party and (scheme_of(job.src_url),
                                          scheme_of(job.dst_url)) in mover.tpc_pairs,
        temp_url=job.tmp_url, on_data_done=on_data_done, tokens=job.tokens,
        source_base=spec.source.url if confined else None)


def judged(job: Job, out: TransferOutcome, params: TransferParams,
           ops_for: Callable[[str], object | None], clock: Callable[[], float]) -> Result:
    """A copy the mover ended well, against the catalogue's adler32 (a mismatch is removed)."""
    if (job.expected and out.checksum and params.verify != "none"
            and normalise_adler32(out.checksum) != job.expected):
        unlink_quietly(ops_for(job.dst_url), job.dst_url)
        return Result(job, None, ErrorClass.CHECKSUM,
                      f"destination adler32 {normalise_adler32(out.checksum)} != expected "
                      f"{job.expected}", clock())
    return Result(job, out, None, "", clock())


def failed(job: Job, exc: TransferError, moved: bool, ops_for: Callable[[str], object | None],
           clock: Callable[[], float]) -> Result:
    """A copy that raised ``exc`` (``moved``: the mover was called; a checksum failure's
    destination is removed)."""
    if exc.error_class is ErrorClass.CHECKSUM and moved:
        unlink_quietly(ops_for(job.dst_url), job.dst_url)
    msg = str(exc)
    prefix = f"{exc.error_class.value}: "
    return Result(job, None, exc.error_class,
                  first_line(msg[len(prefix):] if msg.startswith(prefix) else msg), clock())


def crashed(job: Job, exc: Exception, clock: Callable[[], float]) -> Result:
    return Result(job, None, ErrorClass.OTHER, first_line(f"{type(exc).__name__}: {exc}"),
                  clock())


def unlink_quietly(ops: object | None, url: str) -> None:
    """Remove ``url`` if ``ops`` can (capabilities_of); any failure is ignored."""
    fn = capabilities_of(ops).unlink
    if fn is None:
        return
    # best effort: the copy may never have reached its final name
    with contextlib.suppress(Exception):
        fn(url)


def first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0][:500] if lines else "unknown error"
