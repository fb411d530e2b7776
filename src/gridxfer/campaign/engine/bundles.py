"""A worker's bundle of short transfers in ONE mover call (``CopiesMany``: XRootD's
small local files to root://), where the mover has it; ``attempt.py`` otherwise.

Why (issue 21, loopback: 5,000 x 4 KB at 8 on 2 cores): a worker ran its bundle one
``mover.copy`` at a time, each a native call that let go of the GIL and took it back from
eight other workers and the dispatcher; those hand-overs cost more than the copies. One
call a bundle lets go of it once (docs/performance-notes.md, "One native call a bundle").

Each job keeps its own ``Result`` as ``run_attempt`` would give it: refused (a token
scope), a bad name, the mover's error, the catalogue's adler32. A job's ``started`` and
its result's ``ended`` are the times the mover reports for that copy, so rates, the
optimizer and the journal see each file, not the bundle. The bundle's first job's cancel
(a stop, or the watchdog: it watches that job) ends the copy in progress and the rest
before they begin ("cancelled before it started").
"""
from __future__ import annotations

import functools
from collections.abc import Callable

from gridxfer.errors import TransferError
from gridxfer.movers import names
from gridxfer.movers import tokens as tokens_mod
from gridxfer.movers.base import Copied, Mover, TransferParams
from gridxfer.campaign.engine.attempt import (crashed, failed, judged, refused,
                                              transfer_params)
from gridxfer.campaign.engine.jobs import Job, Result
from gridxfer.campaign.spec.schema import CampaignSpec, TierSpec

CopyMany = Callable[..., list[Copied]]


def run_bundle(jobs: list[Job], spec: CampaignSpec, tier: TierSpec, mover: Mover,
               many: CopyMany, ops_for: Callable[[str], object | None],
               clock: Callable[[], float]) -> list[Result]:
    """One Result per job, in order; never raises."""
    results: dict[int, Result] = {}
    todo: list[tuple[int, Job, TransferParams]] = []
    for i, job in enumerate(jobs):
        if job.refusal is not None:
            results[i] = refused(job, clock)
            continue
        try:
            names.check_transfer(job.name, spec.source.url, job.src_url, job.endpoint,
                                 job.dst_url, source_confined=True)
        except TransferError as exc:
            results[i] = failed(job, exc, False, ops_for, clock)
            continue
        todo.append((i, job, transfer_params(job, spec, tier, mover, True)))
    if todo:
        t0 = clock()
        try:
            copied = many([(job.src_url, job.dst_url, p) for _, job, p in todo],
                          stop=jobs[0].cancel)
        except Exception as exc:        # a mover bug: every job of the call fails with it
            return [results.get(i) or crashed(job, exc, clock) for i, job in enumerate(jobs)]
        for (i, job, params), c in zip(todo, copied, strict=True):
            job.started = t0 + c.started
            ended = functools.partial(float, t0 + c.ended)     # the result's time: its copy's
            with tokens_mod.using(job.tokens, job.src_url, job.dst_url):   # ops_for's calls
                results[i] = (failed(job, c.error, True, ops_for, ended) if c.error is not None
                              else judged(job, c.outcome, params, ops_for, ended) if c.outcome
                              else crashed(job, RuntimeError("no outcome"), ended))
    return [results[i] for i in range(len(jobs))]
