"""The scheduler: worker threads, per-link caps, destination choice, retries, stop.

One dispatcher (the calling thread) owns the journal connection. Each loop it applies
finished transfers and dispatches new ones, each as ONE transaction (batched, so a
no-op mover runs thousands of files per second). An attempt row is committed before
its transfer starts, with the temporary name the mover must write to (``tmp_url``), so a
killed process leaves a trail that ``recovery`` follows to every byte it wrote.

Extension points (issue 3 plugs in here without editing this file): the selector,
exclusion, optimizer and mover factories, defaults in ``factories.py``. The parts:
``feed.py`` (pending files and retries), ``workers.py`` (threads), ``work.py`` (what they
run: a job or a bundle), ``slots.py`` (per-link slots: cap, look-ahead, early release),
``attempt.py`` (one transfer), ``bundles.py`` (a bundle in one mover call), ``outcomes.py``
(results applied), ``ledger.py`` (journal writes), ``watchdog.py`` (hung transfers),
``pooldown.py`` (excluded endpoints journalled; a tier whose whole pool is down),
``steering.py`` (each link's cap from its optimizer), ``placement.py`` (a tier's free
slots filled: files to endpoints, tokens, attempt ids and temporary names).
"""
from __future__ import annotations

import dataclasses
import functools
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence

from gridxfer.errors import ErrorClass
from gridxfer.movers.base import Mover
from gridxfer.campaign.journal import store as journal
from gridxfer.campaign.engine import ceilings, ledger, outcomes, watchdog
from gridxfer.campaign.policy import optimizer as optimizer_mod, selection
from gridxfer.campaign.engine.credentials import TOKEN_WAIT, Credentials, TokenGate
from gridxfer.campaign.engine.factories import (  # noqa: F401  (re-exported: callers import them from here)
    MoverFactory, OpsFactory, close_plugins, default_exclusion_factory, default_mover_factory,
    default_ops_factory, default_optimizer_factory, default_selector_factory, default_selector_name,
    fixed_optimizer_factory, ops_factory_for, tape_factory_for, ThreadMovers)
from gridxfer.campaign.engine.feed import FETCH, PendingFeed  # noqa: F401  (FETCH re-exported)
from gridxfer.campaign.engine.shares import ActivityShares
from gridxfer.campaign.engine.jobs import Job, Result, SchedulerResult  # noqa: F401
from gridxfer.campaign.engine.placement import Placement
from gridxfer.campaign.engine.pooldown import PoolHealth
from gridxfer.campaign.engine.tapeflow import TapeFlow
from gridxfer.campaign.engine.tapepoll import FIRST_POLL, TapeFor
from gridxfer.campaign.spec.schema import CampaignSpec, TierSpec
from gridxfer.campaign.spec.model import by_priority
from gridxfer.campaign.accounting.stats import Accounting, StatsSnapshot
from gridxfer.campaign.engine.slots import LinkSlots
from gridxfer.campaign.engine.steering import Steering
from gridxfer.campaign.engine.workers import WorkerPool
from gridxfer.campaign.engine.work import Work

Observer = Callable[[StatsSnapshot], None]
STOP_GRACE = 30.0            # seconds in-flight transfers get to stop after Ctrl-C
RESULTS_LINGER = 0.2         # s: finished attempts wait at most this long for a commit


def _default_mover_factory(src: str, dst: str, third_party: bool) -> Mover:
    return default_mover_factory(src, dst, third_party)    # looked up at call time (tests)


class Scheduler:
    def __init__(self, conn: sqlite3.Connection, spec: CampaignSpec, *,
                 mover_factory: MoverFactory | None = None,
                 ops_factory: OpsFactory | None = None,
                 selector_factory: Callable[[str], selection.DestinationSelector]
                 = default_selector_factory,
                 exclusion_factory: Callable[[], selection.ExclusionPolicy] | None = None,
                 optimizer_factory: Callable[[TierSpec], optimizer_mod.ConcurrencyOptimizer]
                 = default_optimizer_factory,
                 selector_name: str | None = None, observers: Sequence[Observer] = (),
                 stop: threading.Event | None = None, clock: Callable[[], float] = time.time,
                 stop_grace: float = STOP_GRACE, tape_factory: TapeFor | None = None,
                 tape_first_poll: float = FIRST_POLL,
                 credentials: Credentials | None = None, token_wait: float = TOKEN_WAIT) -> None:
        self.conn, self.spec, self.clock = conn, spec, clock
        # a tier without max_active gets a ceiling suited to its files (ceilings.py)
        tiers = ceilings.effective_tiers(by_priority(spec.destinations), journal.tally(conn))
        self.tiers = {t.name: t for t in tiers}  # served in this order
        self.mover_factory = mover_factory or _default_mover_factory
        self.ops_factory = ops_factory_for(mover_factory, ops_factory)
        self.selector_names = {t.name: selector_name or t.selector or default_selector_name()
                               for t in spec.destinations}
        self.selectors = {t: selector_factory(n) for t, n in self.selector_names.items()}
        self.exclusions = (exclusion_factory() if exclusion_factory is not None
                           else default_exclusion_factory(spec))
        self.observers = list(observers)
        self.stop = stop or threading.Event()
        self.hurry = threading.Event()          # a second Ctrl-C: do not wait for transfers
        self.stop_grace = stop_grace
        self.started = clock()
        self.acct = Accounting({t.name: t.pool for t in spec.destinations}, started=self.started,
                               clock=clock)
        self._movers = ThreadMovers(self.mover_factory, spec.third_party)
        self._slots = LinkSlots(self.tiers)     # running <= cap, look-ahead, early release
        self._work = Work(spec, self.tiers, self._movers, self.ops_factory, self.acct,
                          self._slots, clock, lambda: self._pool.wake())
        self._pool = WorkerPool(self._work.one, self._work.bundle)
        self._inflight: dict[int, Job] = {}
        self._feed = PendingFeed(conn, self.tiers, ActivityShares(spec))   # FTS3's shares
        self.health = PoolHealth(self.tiers, self.exclusions, self.acct, retries=spec.retries,
                                 wait=spec.pool_down_wait)    # exclusions, pools down
        self._batch = ledger.Batch()            # journal rows not committed yet
        self._batch_since = 0.0                 # when the journal was last committed
        self.steering = Steering(self.tiers, optimizer_factory)   # each link's cap
        self.tape = TapeFlow(conn, spec, self.acct, self._feed,   # archiving and staging
                             tape_factory or tape_factory_for(self.ops_factory), clock=clock,
                             wake=self._pool.wake, first_poll=tape_first_poll)
        self.tokens = TokenGate(credentials or Credentials(spec, clock=clock))
        self.token_wait = token_wait
        self._placement = Placement(conn, self._feed, self.acct, self.selectors, self.health,
                                    self.tokens)        # files to endpoints, attempt ids

    # ------------------------------------------------------------ main loop
    def run(self) -> SchedulerResult:
        self.tape.load(self.clock())
        ledger.load_counts(self.conn, self.acct, self.tiers)
        journal.add_event(self.conn, "started", selector=self.selector_names,
                          tiers=sorted(self.tiers))
        journal.set_meta(self.conn, [("state", "running")])
        workers = sum(t.max_active for t in self.tiers.values())
        self._pool.start(workers)
        next_tick = 0.0
        try:
            while True:
                self._drain(block=0.0)
                now = self.clock()
                if self.tape.apply(self._batch, now):
                    self._flush(now)            # online files pending before the feed reads
                if self.stop.is_set():
                    return self._shutdown()
                if now >= next_tick:            # once a second: timeouts are >= 10 s
                    self._tick(now)
                    self._watchdog(now)
                    self._token_stall(now)
                    next_tick = now + 1.0
                elif now >= self.steering.due():    # an optimizer that asked to look sooner
                    self._batch.events.extend(self.steering.step(now, self.acct, self._slots))
                self._dispatch(now)
                if now - self._batch_since >= RESULTS_LINGER or len(self._batch.att_rows) >= 512:
                    self._flush(now)
                if not self._inflight and not self._feed.has_work() and not self.tape.busy():
                    return self._finish()
                wake = min(next_tick, self.steering.due())
                self._drain(block=min(0.25, max(0.001, wake - self.clock()),
                                      self._feed.next_retry_in(now)))
        finally:
            self._stop_threads()

    def _stop_threads(self) -> None:
        """Workers exit on a sentinel and are joined (a thread still inside XrdCl/gfal2 at
        interpreter exit can abort the process); policies with ``close()`` are closed."""
        self._pool.close()
        self.tape.close(1.0 if self.hurry.is_set() else 10.0)
        self.steering.close()
        close_plugins((self.exclusions, *self.selectors.values()))
        self._pool.join(1.0 if self.hurry.is_set() else 10.0)

    def _tick(self, now: float) -> None:
        self.acct.tick(now)
        events = self.steering.step(now, self.acct, self._slots)
        for tier in self.tiers:     # also links with every slot taken (_dispatch skips those)
            if not self.acct.queued(tier):
                continue
            eligible, ev = self.health.eligible(tier, now)
            events.extend(ev)
            if not eligible:
                self._hold(tier, now)
        self._batch.events.extend(events)
        if self.observers:
            snap = dataclasses.replace(self._slots.annotate(self.acct.snapshot(now)),
                                       excluded=self.health.excluded(),
                                       pools_down=self.health.pools_down(now),
                                       tape_oldest=self.tape.oldest(now))
            for obs in self.observers:
                obs(snap)

    # ------------------------------------------------------------ dispatch
    def _hold(self, tier: str, now: float) -> None:
        """No endpoint of ``tier`` takes a file now: ``PoolHealth.hold`` (pooldown.py)."""
        self.health.hold(tier, now, feed=self._feed, batch=self._batch, conn=self.conn,
                         flush=lambda: self._flush(now))

    def _dispatch(self, now: float) -> None:
        jobs: list[Job] = []
        for tier, spec in self.tiers.items():
            if self._slots.wants_spare_workers(tier):       # verifications hold threads
                self._pool.start(self._spares(tier, spec.max_active),
                                 init=functools.partial(self._work.warm, tier))
            free = self._slots.free(tier, self.acct.cap(tier), self.acct.active(tier))
            if not free or self.tokens.blocked(tier, now):
                continue
            eligible, ev = self.health.eligible(tier, now)
            self._batch.events.extend(ev)
            if not eligible:
                self._hold(tier, now)
                continue
            jobs += self._placement.fill(tier, eligible, free, now, self._batch.events)
        if not jobs:
            return
        self._batch.file_updates.extend((j.endpoint, j.dst_url, now, j.file_id) for j in jobs)
        self._batch.attempts.extend((j.attempt_id, j.file_id, j.tier, j.endpoint, j.dst_url, now,
                                     self.tiers[j.tier].streams, j.tmp_url) for j in jobs)
        self._flush(now)            # attempt rows are committed before the transfers start
        for job in jobs:
            self._inflight[job.attempt_id] = job
        for bundle in self._slots.bundles(jobs):
            self._pool.submit_bundle(bundle)

    def _spares(self, tier: str, max_active: int) -> int:
        """Spare workers for ``tier`` once its verifications hold workers: one per file it
        still has to copy, up to ``max_active``. Each opens its own sessions to the pool
        (``Work.warm``); a GridFTP one is a GSI login and a process on the server, so a
        default ceiling of 128 for 5 small files made 128 logins, and the copies waited
        15-20 s behind them (test_mixed_campaign_tpc, session 39)."""
        return max(1, min(max_active, self.acct.queued(tier) + self.acct.active(tier)))

    def _flush(self, now: float) -> None:
        """Commit this loop's journal rows (results, dispatches, events) as one transaction."""
        if self._batch:
            batch, self._batch = self._batch, ledger.Batch()
            ledger.record(self.conn, batch, now)
        self._batch_since = now

    def _watchdog(self, now: float) -> None:
        """Cancel, then abandon, transfers that do not end (``watchdog.py``): an abandoned
        one's worker is replaced and its slot handed back, or the link stays a slot short."""
        abandoned = watchdog.overdue(self._inflight.values(), self.spec.timeout, now)
        if abandoned:
            self._pool.write_off(r.job for r in abandoned)
            for r in abandoned:
                self._slots.give_back(r.job)
            self._apply(abandoned + watchdog.stranded(abandoned, self._inflight, now))
            self._pool.start(len(abandoned))

    def _token_stall(self, now: float) -> None:
        """Nothing runs, and every tier with files waits for a token since ``token_wait``:
        stop (interrupted, resumable: ``resume`` reads the token sources again)."""
        if self._inflight:
            return
        waiting = [t for t in self.tiers if self.acct.queued(t)]
        since = self.tokens.stalled_since(waiting)
        if since is not None and now - since >= self.token_wait:
            self._batch.events.append(("token_wait_over", {
                "tiers": waiting, "reason": self.tokens.message()}))
            self.stop.set()

    # ------------------------------------------------------------ results
    def _drain(self, block: float) -> None:
        results = self._pool.collect(block)
        if results:
            self._apply(results)

    def _apply(self, results: list[Result]) -> None:
        for r in results:
            self._feed.ended(r.job.tier, r.job.name)      # its activity's slot share
        outcomes.settle(results, self._inflight, self._batch, slots=self._slots, acct=self.acct,
                        exclusions=self.exclusions, feed=self._feed, tiers=self.tiers,
                        retries=self.spec.retries, stop=self.stop,
                        waiting=self.health.waiting, tape=self.tape)

    # ------------------------------------------------------------ the end
    def _finish(self) -> SchedulerResult:
        now = self.clock()
        self._tick(now)
        snap = self.acct.snapshot(now)
        state = "partial" if snap.files_failed else "done"
        self._close(state, "finished", now, done=snap.files_done, failed=snap.files_failed,
                    seconds=round(now - self.started, 3))
        return SchedulerResult(state, snap.files_done, snap.files_failed, now - self.started, snap)

    def _shutdown(self) -> SchedulerResult:
        stuck = watchdog.wind_down(self._inflight, drain=lambda b: self._drain(block=b),
                                   clock=self.clock, grace=self.stop_grace, hurry=self.hurry,
                                   write_off=self._pool.write_off)
        now = self.clock()
        waiting = [j for j in stuck if not j.running]
        if waiting:
            self._apply([Result(j, None, ErrorClass.CANCELLED, "interrupted", now)
                         for j in waiting])
        snap = self.acct.snapshot(now)
        self._close("interrupted", "interrupted", now, in_flight=len(stuck),
                    done=snap.files_done, failed=snap.files_failed)
        return SchedulerResult("interrupted", snap.files_done, snap.files_failed,
                               now - self.started, snap)

    def _close(self, state: str, kind: str, now: float, **detail) -> None:
        self._flush(now)
        ledger.record_end(self.conn, state, kind, now, **detail)
