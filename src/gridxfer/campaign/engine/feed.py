"""The files waiting to be dispatched, per tier: pending journal rows fetched ``FETCH`` at
a time (in id order, so a million-file journal is never loaded at once) and a heap of
files whose retry time has not come yet.

A row is ``(file_id, name, src_url, size, attempts, expected_adler32, avoid)`` where
``avoid`` is the frozenset of endpoints this file must not go to again.
"""
from __future__ import annotations

import heapq
import sqlite3
from collections.abc import Iterable

from gridxfer.campaign.journal import store as journal
from gridxfer.campaign.engine.jobs import Retry

FETCH = 4096                 # pending rows fetched per query


class PendingFeed:
    def __init__(self, conn: sqlite3.Connection, tiers: Iterable[str]) -> None:
        self.conn = conn
        tiers = list(tiers)
        self._queues: dict[str, list] = {t: [] for t in tiers}     # reversed stacks of rows
        self._cursor = {t: 0 for t in tiers}
        self._exhausted = {t: False for t in tiers}
        self._retry: dict[str, list[Retry]] = {t: [] for t in tiers}

    def has_work(self) -> bool:
        return any(self._queues[t] or self._retry[t] or not self._exhausted[t]
                   for t in self._queues)

    def next_retry_in(self, now: float) -> float:
        """Seconds until the earliest retry is due (0.25 when none waits)."""
        due = [h[0].not_before for h in self._retry.values() if h]
        return max(0.001, min(due) - now) if due else 0.25

    def next(self, tier: str, now: float) -> tuple | None:
        """The next row to dispatch on ``tier`` (a due retry first), or None."""
        heap = self._retry[tier]
        if heap and heap[0].not_before <= now:
            return heapq.heappop(heap).row
        q = self._queues[tier]
        while not q and not self._exhausted[tier]:
            rows = journal.fetch_pending(self.conn, tier, self._cursor[tier], FETCH)
            if len(rows) < FETCH:
                self._exhausted[tier] = True
            if rows:
                self._cursor[tier] = rows[-1][0]
            for r in reversed(rows):
                row: tuple = (r[0], r[1], r[2], r[3], r[4], r[6], frozenset())
                if r[5] > now:
                    heapq.heappush(heap, Retry(r[5], r[0], row))
                else:
                    q.append(row)
        return q.pop() if q else None

    def drop(self, tier: str) -> None:
        """Forget the tier's waiting files (they were failed in the journal as a whole)."""
        self._queues[tier].clear()
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
