"""A tier's free slots filled, on the dispatcher's loop: the next files from the feed, each
on the endpoint its tier's selector chooses among those taking files now (away from the
endpoints the file failed on where the pool has others; a half-open endpoint gets one
probe), its tokens granted, its attempt numbered and its temporary name made. A tier that
waits for a fresh token stops there, the file back in the feed. The scheduler journals
the attempts before any of them starts (``recovery`` follows them after a kill).
"""
from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping
from typing import Any

from gridxfer.movers import names
from gridxfer.movers.urls import attempt_temp_url
from gridxfer.campaign.journal import store as journal
from gridxfer.campaign.policy import selection
from gridxfer.campaign.accounting.stats import Accounting
from gridxfer.campaign.engine.credentials import TokenGate
from gridxfer.campaign.engine.feed import PendingFeed
from gridxfer.campaign.engine.jobs import Job
from gridxfer.campaign.engine.pooldown import PoolHealth


class Placement:
    """Files to endpoints, and this run's attempt ids and temporary names. Dispatcher
    thread only."""

    def __init__(self, conn: sqlite3.Connection, feed: PendingFeed, acct: Accounting,
                 selectors: Mapping[str, selection.DestinationSelector], health: PoolHealth,
                 tokens: TokenGate) -> None:
        self.feed, self.acct, self.selectors = feed, acct, selectors
        self.health, self.tokens = health, tokens
        self._attempt_id = journal.next_attempt_id(conn)
        self._tmp_tag = os.urandom(3).hex()     # + attempt id: this run's temporary names

    def fill(self, tier: str, eligible: list[str], free: int, now: float,
             events: list[tuple[str, dict[str, Any]]]) -> list[Job]:
        """Up to ``free`` new jobs of ``tier`` on the ``eligible`` endpoints (the token
        gate's events go to ``events``)."""
        jobs: list[Job] = []
        choice = len(eligible) > 1          # one endpoint: nothing to choose
        stats = self.acct.pool_stats(eligible, now) if choice else {}
        selector = self.selectors[tier]
        probes = self.health.probes(eligible)   # half-open: one transfer each
        while free > 0 and eligible:
            row = self.feed.next(tier, now)
            if row is None:
                break
            fid, name, src, size, n_att, expected, avoid = row
            if choice:
                cands = [u for u in eligible if u not in avoid] or eligible
                backlog = max(0, self.acct.queued(tier) - 1) * size  # ~bytes still waiting
                ep = selector.choose(selection.FileToPlace(fid, name, size, backlog), cands,
                                     stats)
            else:
                ep = eligible[0]
            if ep in probes:
                eligible = [u for u in eligible if u != ep]
            dst = names.join_url(ep, name, check=False)   # checked in attempt.py
            rate = stats[ep].ewma_rate if ep in stats else None    # bytes/s per transfer
            grant, ev = self.tokens.grant(tier, ep, src, dst, size, now, rate)
            events.extend(ev)
            if grant.pause is not None:     # the tier waits for a fresh token
                self.feed.retry_later(tier, 0.0, row)
                break
            aid = self._attempt_id
            tmp = attempt_temp_url(dst, f"{self._tmp_tag}{aid:x}")
            job = Job(aid, fid, tier, name, src, dst, ep, size, n_att + 1,
                      expected, avoid, now, self.acct.start(tier, ep, size, now), tmp)
            self._attempt_id += 1
            if choice:
                stats = self.acct.pool_stats(eligible, now)
            job.tokens, job.refusal = grant.tokens, grant.refuse
            jobs.append(job)
            free -= 1
        return jobs
