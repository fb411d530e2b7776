"""Endpoints out of rotation per tier, and a tier whose whole pool is down: ``PoolHealth``.

The exclusion policy (``exclusions.py``) says which endpoints are out right now; this
module journals the changes (``excluded``/``readmitted`` events), keeps them for the live
view, and decides what happens to the files of a tier that none of its pool can take.

A pool is *down* when every endpoint of it is down (``DefaultExclusions.down``: its
circuit opened, or its last write failed with NO_SPACE, and no write succeeded since),
from the moment the last of them went down (``since``). A pool that is only busy (a probe
in flight) or slow is not down: its files wait, as they always did. While a pool is down
and none of its endpoints takes a transfer (a half-open circuit lets one probe through):

* ``on_pool_down: fail`` (the default): each file that comes due is charged an attempt it
  did not make (``files.attempts`` + 1, no ``attempts`` row: nothing was sent) with the
  exclusion's error class and reason, and waits for its next retry; once its budget
  (``retries.max``) is spent it fails. At ``since + retries.max x retries.backoff`` every
  remaining file of the tier fails at once, whatever its budget: the cooldowns of the
  circuit breaker never keep a file waiting longer than its retries allow.
* ``on_pool_down: {wait: D}``: files keep their budget (an attempt that fails while the
  pool is down, such as the breaker's half-open probe, is not counted either: see
  ``outcomes.settle``); at ``since + D`` every remaining file fails.

A file's message names the pool, why it is down and the setting, and keeps the file's last
attempt's class and text after it (``; last attempt: ...``, ``ledger.KEEP_LAST``). A write
that succeeds on any endpoint of the pool ends its down state. Events: ``pool_down``
{tier, since, deadline, reason, on_pool_down}, ``pool_up`` {tier}, ``pool_failed`` {tier,
files, reason}.
"""
from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable

from gridxfer.redact import redact
from gridxfer.units import fmt_duration
from gridxfer.campaign.policy import exclusion_log
from gridxfer.campaign.journal import store as journal
from gridxfer.campaign.policy.exclusion_log import ExcludedEndpoint
from gridxfer.campaign.engine.feed import PendingFeed
from gridxfer.campaign.engine import ledger
from gridxfer.campaign.engine.ledger import Batch
from gridxfer.campaign.policy.selection import Exclusion, ExclusionPolicy
from gridxfer.campaign.spec.model import RetrySpec, TierSpec
from gridxfer.campaign.accounting.stats import Accounting

log = logging.getLogger(__name__)

HOLD_BATCH = 4096           # due files charged per tier and scheduler loop
MESSAGE_MAX = 500           # characters of a file's error message


@dataclass(frozen=True)
class PoolDown:
    tier: str
    since: float            # when the last endpoint of the pool went down
    deadline: float         # when the tier's remaining files fail
    error_class: str        # ErrorClass value of the first endpoint's failure (pool order)
    reason: str             # names every endpoint of the pool and why it is down
    waiting: bool           # on_pool_down: wait (files keep their retries until the deadline)

    def message(self, now: float, prefix: str = "") -> str:
        """A file's error message: the exclusion's reason and the setting at work."""
        setting = (f"on_pool_down: wait {fmt_duration(self.deadline - self.since)}"
                   if self.waiting else "on_pool_down: fail")
        text = f"{prefix}{self.reason} (down for {fmt_duration(now - self.since)}; {setting})"
        return text[:MESSAGE_MAX]


class PoolHealth:
    def __init__(self, tiers: dict[str, TierSpec], policy: ExclusionPolicy, acct: Accounting,
                 *, retries: RetrySpec, wait: float) -> None:
        self.tiers, self.policy, self.acct = tiers, policy, acct
        self.retries, self.wait = retries, wait
        self._excluded: dict[str, dict[str, Exclusion]] = {t: {} for t in tiers}
        self._since: dict[tuple[str, str], float] = {}
        self._noticed: dict[str, float] = {}          # tier -> since, of a pool seen down
        self._down_fn: Callable[[str, float], Any] | None = getattr(policy, "down", None)

    # ------------------------------------------------------------ exclusions
    def eligible(self, tier: str, now: float) -> tuple[list[str], list[tuple[str, dict]]]:
        """The endpoints of ``tier`` that may take a file now, and the journal events of
        what changed since the last call."""
        pool = self.tiers[tier].pool
        ok, excl = self.policy.eligible(pool, self.acct.pool_stats(pool, now), now)
        added, removed = exclusion_log.exclusion_changes(self._excluded[tier], excl)
        events = [("excluded", exclusion_log.exclusion_event(tier, e, e.url)) for e in added]
        events += [("readmitted", exclusion_log.exclusion_event(tier, None, u)) for u in removed]
        for e in added:
            self._since[(tier, e.url)] = now
            log.info("excluded %s %s: %s", tier, e.url, e.reason)
        for u in removed:
            self._since.pop((tier, u), None)
            log.info("readmitted %s %s", tier, u)
        self._excluded[tier] = {e.url: e for e in excl}
        if not ok and excl and all(e.until is None for e in excl):
            ok = list(pool)     # nothing will ever come back: let the files fail on their own
        if tier in self._noticed:
            down = self.down(tier, now)
            if down is None:
                del self._noticed[tier]
                events.append(("pool_up", {"tier": tier}))
            elif now >= down.deadline:
                ok = []         # past the deadline: no more probes, hold() fails the files
        return ok, events

    def probes(self, eligible: list[str]) -> set[str]:
        """Of ``eligible``, the endpoints that may take one probe transfer only."""
        fn = getattr(self.policy, "probing", None)
        return {u for u in eligible if fn(u)} if fn is not None else set()

    def excluded(self) -> tuple[ExcludedEndpoint, ...]:
        """Every endpoint out of rotation now, with its reason (for the live view)."""
        return tuple(ExcludedEndpoint(t, u, e.reason, self._since.get((t, u), 0.0), e.until)
                     for t, by in self._excluded.items() for u, e in by.items())

    # ------------------------------------------------------------ pools down
    def down(self, tier: str, now: float) -> PoolDown | None:
        """The tier's pool, if every endpoint of it is down (policies without ``down``:
        never)."""
        if self._down_fn is None:
            return None
        downs = []
        for url in self.tiers[tier].pool:
            d = self._down_fn(url, now)
            if d is None:
                return None
            downs.append(d)
        since = max(d.since for d in downs)
        grace = self.wait if self.wait > 0 else self.retries.max * self.retries.backoff
        why = "; ".join(f"{d.url} excluded: {d.reason}" for d in downs)
        return PoolDown(tier, since, since + grace, downs[0].error_class,
                        f"every endpoint of {tier} is down: {why}", self.wait > 0)

    def pools_down(self, now: float) -> tuple[PoolDown, ...]:
        """The tiers whose pool is down and that still have files waiting."""
        return tuple(d for d in (self.down(t, now) for t in self.tiers if self.acct.queued(t))
                     if d is not None)

    def waiting(self, tier: str, now: float) -> bool:
        """True while the tier's pool is down and the campaign waits for it (a failure at
        ``now`` then says nothing about the file: ``outcomes.settle`` does not count it)."""
        d = self.down(tier, now)
        return d is not None and d.waiting and now < d.deadline

    def hold(self, tier: str, now: float, *, feed: PendingFeed, batch: Batch,
             conn: sqlite3.Connection, flush: Callable[[], None]) -> None:
        """``tier`` has no eligible endpoint now: if its pool is down, charge the files that
        come due (fail) or let them wait (wait), and fail them all once the deadline passed."""
        down = self.down(tier, now)
        if down is None:
            return
        if self._noticed.get(tier) != down.since:
            self._noticed[tier] = down.since
            batch.events.append(("pool_down", {
                "tier": tier, "since": down.since, "deadline": down.deadline,
                "reason": down.reason, "on_pool_down": "wait" if down.waiting else "fail"}))
        if now >= down.deadline:
            flush()                 # the batch's files are in the journal before the update
            self._fail_remaining(conn, feed, down, now)
        elif not down.waiting:
            self._charge(down, feed, batch, now)

    def _charge(self, down: PoolDown, feed: PendingFeed, batch: Batch, now: float) -> None:
        msg = down.message(now, "not tried: ")
        for _ in range(HOLD_BATCH):
            row = feed.next(down.tier, now)
            if row is None:
                return
            fid, size, n = row[0], row[3], row[4] + 1
            if n <= self.retries.max:
                nb = now + self.retries.backoff * 2 ** (n - 1)
                batch.skip_rows.append(("pending", down.error_class, msg, nb, now, fid))
                feed.retry_later(down.tier, nb, (*row[:4], n, *row[5:]))
            else:
                batch.skip_rows.append(("failed", down.error_class, msg, 0.0, now, fid))
                self.acct.skipped(down.tier, 1, size)

    def _fail_remaining(self, conn: sqlite3.Connection, feed: PendingFeed, down: PoolDown,
                        now: float) -> None:
        msg = redact(down.message(now))      # URLs in it: never a credential in the journal
        conn.execute("BEGIN IMMEDIATE")
        try:
            n, size = conn.execute("SELECT count(*), coalesce(sum(size), 0) FROM files "
                                   "WHERE tier = ? AND state = 'pending'", (down.tier,)).fetchone()
            conn.execute("UPDATE files SET state = 'failed', error_class = ?, "
                         f"error_msg = {ledger.KEEP_LAST}, updated = ? "
                         "WHERE tier = ? AND state = 'pending'",
                         (down.error_class, msg, now, down.tier))
            if n:
                journal.add_event(conn, "pool_failed", ts=now, tier=down.tier, files=n, reason=msg)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:     # SQLite already rolled back after SQLITE_FULL / IOERR
                conn.execute("ROLLBACK")
            raise
        feed.drop(down.tier)
        self.acct.skipped(down.tier, n, size)
