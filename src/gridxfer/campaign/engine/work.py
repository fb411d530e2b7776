"""What a worker thread runs for the scheduler: one job (``attempt.py``), or a bundle in
one mover call where the mover copies many (``bundles.py``); each inside its link's slot
(``slots.py``). The dispatcher's side (placing jobs, journalling them, settling results)
stays in ``scheduler.py``; nothing here touches the journal."""
from __future__ import annotations

from collections.abc import Callable

from gridxfer.errors import ErrorClass
from gridxfer.movers.base import NOT_STARTED
from gridxfer.movers.capabilities import capabilities_of
from gridxfer.campaign.accounting.stats import Accounting
from gridxfer.campaign.engine.attempt import run_attempt
from gridxfer.campaign.engine.bundles import run_bundle
from gridxfer.campaign.engine.factories import OpsFactory, ThreadMovers
from gridxfer.campaign.engine.jobs import Job, Result
from gridxfer.campaign.engine.slots import LinkSlots
from gridxfer.campaign.spec.schema import CampaignSpec, TierSpec


class Work:
    """The scheduler's ``WorkerPool`` calls ``one`` and ``bundle``, in its threads."""

    def __init__(self, spec: CampaignSpec, tiers: dict[str, TierSpec], movers: ThreadMovers,
                 ops_factory: OpsFactory, acct: Accounting, slots: LinkSlots,
                 clock: Callable[[], float], wake: Callable[[], None]) -> None:
        self.spec, self.tiers, self.movers, self.ops_factory = spec, tiers, movers, ops_factory
        self.acct, self.slots, self.clock, self.wake = acct, slots, clock, wake

    def warm(self, tier: str) -> None:
        """A new worker's sessions to the source and ``tier``'s pool, before its first job."""
        self.movers.warm(self.spec.source.url, self.tiers[tier].pool)

    def ops(self, url: str) -> object | None:
        try:
            return self.ops_factory(url)
        except Exception:
            return None

    def one(self, job: Job) -> Result:
        def work(data_done: Callable[[], None]) -> Result:
            job.started = self.clock()      # a job dispatched ahead waited for its slot
            job.running = True
            return run_attempt(job, self.spec, self.tiers[job.tier], self.movers, self.ops,
                               self.acct, self.clock, on_data_done=data_done)

        res = self.slots.run(job, work, self.wake)
        if res is None:
            return Result(job, None, ErrorClass.CANCELLED, NOT_STARTED, self.clock())
        return res

    def bundle(self, jobs: list[Job]) -> list[Result]:
        """A bundle in one mover call (bundles.py) where the mover copies many; each job
        through ``one`` otherwise. The bundle holds one slot: its copies run one after the
        other, its first job watched for the whole call."""
        head = jobs[0]
        try:
            mover = self.movers(head.src_url, head.dst_url)
        except Exception:
            mover = None
        many = capabilities_of(mover).copy_many if mover is not None else None
        if mover is None or many is None:
            return [self.one(job) for job in jobs]

        def work(_data_done: Callable[[], None]) -> list[Result]:
            now = self.clock()
            for job in jobs:
                job.started = now
            head.running = True
            return run_bundle(jobs, self.spec, self.tiers[head.tier], mover, many, self.ops,
                              self.clock)

        res = self.slots.run(head, work, self.wake)
        if res is None:
            now = self.clock()
            return [Result(j, None, ErrorClass.CANCELLED, NOT_STARTED, now) for j in jobs]
        return res
