"""The files waiting to be dispatched, per tier: pending journal rows fetched ``FETCH`` at
a time (in id order, so a million-file journal is never loaded at once) and a heap of
files whose retry time has not come yet.

With FTS3 activity shares (``shares.py``) each tier keeps one queue per activity, and the
next file comes from the activity the link's next slot goes to; rows are fetched on until
every activity has one ready or the tier is read to its end (activities come from the
campaign file's own list, which is in memory already).

A row is ``(file_id, name, src_url, size, attempts, expected_adler32, avoid)`` where
``avoid`` is the frozenset of endpoints this file must not go to again.
"""
from __future__ import annotations

import heapq
import sqlite3
from collections import deque
from collections.abc import Iterable

from gridxfer.campaign.journal import store as journal
from gridxfer.campaign.engine.jobs import Retry
from gridxfer.campaign.engine.shares import ActivityShares

FETCH = 4096                 # pending rows fetched per query


class PendingFeed:
    def __init__(self, conn: sqlite3.Connection, tiers: Iterable[str],
                 shares: ActivityShares | None = None) -> None:
        self.conn = conn
        tiers = list(tiers)
        self._queues: dict[str, list] = {t: [] for t in tiers}     # reversed stacks of rows
        self._cursor = {t: 0 for t in tiers}
        self._exhausted = {t: False for t in tiers}
        self._retry: dict[str, list[Retry]] = {t: [] for t in tiers}
        self.shares = shares if shares is not None and shares.active else None
        self._by_activity: dict[str, dict[str, deque]] = {t: {} for t in tiers}

    def has_work(self) -> bool:
        return any(self._queues[t] or self._retry[t] or not self._exhausted[t]
                   or any(self._by_activity[t].values()) for t in self._queues)

    def next_retry_in(self, now: float) -> float:
        """Seconds until the earliest retry is due (0.25 when none waits)."""
        due = [h[0].not_before for h in self._retry.values() if h]
        return max(0.001, min(due) - now) if due else 0.25

    def next(self, tier: str, now: float) -> tuple | None:
        """The next row to dispatch on ``tier`` (a due retry first), or None."""
        heap = self._retry[tier]
        if heap and heap[0].not_before <= now:
            return self._took(tier, heapq.heappop(heap).row)
        if self.shares is not None:
            return self._next_shared(tier, now)
        q = self._queues[tier]
        while not q and not self._exhausted[tier]:
            self._fetch(tier, now)
        return q.pop() if q else None

    def _next_shared(self, tier: str, now: float) -> tuple | None:
        assert self.shares is not None
        queues = self._by_activity[tier]
        while not self._exhausted[tier] and not all(
                queues.get(a) for a in self.shares.activities):
            self._fetch(tier, now)
        act = self.shares.pick(tier, [a for a, q in queues.items() if q])
        return self._took(tier, queues[act].popleft()) if act is not None else None

    def _took(self, tier: str, row: tuple) -> tuple:
        if self.shares is not None:
            self.shares.started(tier, row[1])
        return row

    def ended(self, tier: str, name: str) -> None:
        """A dispatched file's attempt ended (done, failed or to be retried)."""
        if self.shares is not None:
            self.shares.ended(tier, name)

    def _fetch(self, tier: str, now: float) -> None:
        rows = journal.fetch_pending(self.conn, tier, self._cursor[tier], FETCH)
        if len(rows) < FETCH:
            self._exhausted[tier] = True
        if rows:
            self._cursor[tier] = rows[-1][0]
        ready = []
        for r in rows:
            row: tuple = (r[0], r[1], r[2], r[3], r[4], r[6], frozenset())
            if r[5] > now:
                heapq.heappush(self._retry[tier], Retry(r[5], r[0], row))
            else:
                ready.append(row)
        if self.shares is None:
            self._queues[tier].extend(reversed(ready))
            return
        queues = self._by_activity[tier]
        for row in ready:
            queues.setdefault(self.shares.of(row[1]), deque()).append(row)

    def drop(self, tier: str) -> None:
        """Forget the tier's waiting files (they were failed in the journal as a whole)."""
        self._queues[tier].clear()
        self._by_activity[tier].clear()
        self._retry[tier].clear()
        self._exhausted[tier] = True

    def add(self, tier: str, row: tuple) -> None:
        """A file that became pending after the run started (its tape source is online;
        already pending in the journal): queued now, unless the feed's next read of the
        journal will find it (its id is past the cursor), so it is never fed twice."""
        if row[0] > self._cursor[tier] and not self._exhausted[tier]:
            return
        heapq.heappush(self._retry[tier], Retry(0.0, row[0], row))

    def retry_later(self, tier: str, not_before: float, row: tuple) -> None:
        heapq.heappush(self._retry[tier], Retry(not_before, row[0], row))
