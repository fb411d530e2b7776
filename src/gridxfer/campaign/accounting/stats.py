"""Accounting for a running campaign: the one module that counts.

The scheduler reports starts, progress and finishes here; everything else (the live
progress view, alerts, the selectors and the optimizer) only reads frozen snapshots:
``StatsSnapshot`` for the campaign, ``LinkSnapshot`` per link (tier), and
``selection.EndpointStats`` per destination endpoint. Thread-safe: movers report
progress from worker threads.
"""
from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field

from gridxfer.campaign.policy.exclusions import NOT_ENDPOINT_FAULT
from gridxfer.campaign.accounting.meter import EndpointMeter
from gridxfer.campaign.policy.optimizer import LinkSample
from gridxfer.campaign.policy.selection import EndpointStats

RATE_WINDOW = 5.0         # seconds over which "current" rates are measured


@dataclass(frozen=True)
class LinkSnapshot:
    tier: str
    active: int               # transfers in flight
    cap: int                  # current concurrency cap (from the optimizer)
    reason: str               # the optimizer's reason for the cap
    queued: int               # files waiting (including retries in backoff)
    files_total: int
    done: int
    failed: int
    bytes_total: int
    bytes_done: int           # bytes of files that are done
    rate: float               # bytes/s over the last RATE_WINDOW seconds
    ahead: int = 0            # of ``active``: handed out ahead, waiting for a slot (small files)
    archiving: int = 0        # copied to a tape-backed tier, not on tape yet


@dataclass(frozen=True)
class StatsSnapshot:
    now: float
    elapsed: float
    files_total: int
    files_done: int
    files_failed: int
    files_active: int
    bytes_total: int
    bytes_done: int
    rate: float                               # aggregate bytes/s, last RATE_WINDOW seconds
    mean_rate: float                          # bytes moved / elapsed
    eta: float | None                         # seconds, None if unknown
    retries: int                              # failed attempts that will be retried
    failures: dict[str, int]                  # failed attempts by ErrorClass value
    links: tuple[LinkSnapshot, ...]
    endpoints: tuple[EndpointStats, ...]
    # filled by the scheduler (pooldown.PoolHealth): exclusion_log.ExcludedEndpoint and
    # pooldown.PoolDown values, for the live view
    excluded: tuple = ()
    pools_down: tuple = ()
    files_archiving: int = 0                  # copied, waiting for tape (archive tiers)
    tape_oldest: float | None = None          # s the longest-waiting of them has waited


class Flight:
    """One transfer in flight, as accounting sees it."""

    __slots__ = ("tier", "endpoint", "size", "done")

    def __init__(self, tier: str, endpoint: str, size: int) -> None:
        self.tier, self.endpoint, self.size, self.done = tier, endpoint, size, 0

    def __hash__(self) -> int:
        return id(self)


@dataclass
class _Link:
    files_total: int = 0
    bytes_total: int = 0
    done: int = 0
    failed: int = 0
    bytes_done: int = 0
    bytes_failed: int = 0
    active: int = 0
    queued: int = 0
    archiving: int = 0
    bytes_archiving: int = 0
    cap: int = 0
    reason: str = ""
    moved: int = 0                     # monotonic: every byte any attempt reported
    ok_since: int = 0                  # for LinkSample: since the previous sample
    failed_since: int = 0
    samples: deque = field(default_factory=lambda: deque(maxlen=64))


class Accounting:
    """Per-link counters here; per-endpoint stats in ``meter.EndpointMeter``."""

    def __init__(self, pools: dict[str, tuple[str, ...]], *, started: float,
                 clock=None) -> None:
        import time
        self._lock = threading.Lock()
        self._clock = clock or time.time
        self._started = started
        self._links = {tier: _Link() for tier in pools}
        self.meter = EndpointMeter()
        for pool in pools.values():
            for url in pool:
                self.meter.add_endpoint(url, started)
        self._failures: dict[str, int] = {}
        self._retries = 0
        self._samples: deque = deque(maxlen=64)

    # ---------------------------------------------------------- writers (scheduler)
    def load(self, tier: str, *, files_total: int, bytes_total: int, done: int, failed: int,
             bytes_done: int, queued: int, bytes_failed: int = 0, archiving: int = 0,
             bytes_archiving: int = 0) -> None:
        link = self._links[tier]
        link.files_total, link.bytes_total, link.bytes_failed = (
            files_total,
            bytes_total,
            bytes_failed,
        )
        link.done, link.failed, link.bytes_done, link.queued = done, failed, bytes_done, queued
        link.archiving, link.bytes_archiving = archiving, bytes_archiving

    def set_cap(self, tier: str, cap: int, reason: str) -> None:
        self._links[tier].cap, self._links[tier].reason = cap, reason

    def requeued(self, tier: str, n: int = 1) -> None:
        with self._lock:
            self._links[tier].queued += n

    def start(self, tier: str, endpoint: str, size: int, now: float) -> Flight:
        flight = Flight(tier, endpoint, size)
        with self._lock:
            link = self._links[tier]
            link.active += 1
            link.queued -= 1
        self.meter.start(endpoint, flight, size, now)
        return flight

    def progress(self, flight: Flight, done: int) -> None:
        delta = done - flight.done
        if delta <= 0 or delta >= flight.size > 0:
            return      # nothing new, or the whole file in one report: finish() credits it
                        # (small files: two locks per file saved on the workers' hot path)
        with self._lock:
            flight.done = done
            self._links[flight.tier].moved += delta
        self.meter.progress(flight.endpoint, flight, done, self._clock())

    def finish(self, flight: Flight, *, ok: bool, nbytes: int, error_class: str | None,
               outcome: str, now: float) -> None:
        """``outcome``: done | archiving | failed | retry | cancelled (what happens to the
        file; archiving: copied to a tape-backed tier, done once ``archived``)."""
        self.meter.end(flight.endpoint, flight, ok, now, bytes_=nbytes if ok else None,
                       counts_as_failure=(error_class or "other") not in NOT_ENDPOINT_FAULT)
        with self._lock:
            link = self._links[flight.tier]
            if nbytes > flight.done:
                link.moved += nbytes - flight.done
            link.active -= 1
            if ok and outcome == "archiving":
                link.archiving += 1
                link.bytes_archiving += flight.size
                link.ok_since += 1
                return
            if ok:
                link.done += 1
                link.bytes_done += flight.size
                link.ok_since += 1
                return
            if outcome == "cancelled":
                link.queued += 1
                return
            link.failed_since += 1
            self._failures[error_class or "other"] = (
                self._failures.get(error_class or "other", 0) + 1
            )
            if outcome == "retry":
                self._retries += 1
                link.queued += 1
            else:
                link.failed += 1
                link.bytes_failed += flight.size

    def skipped(self, tier: str, files: int, nbytes: int, error_class: str | None = None
                ) -> None:
        """``files`` of ``tier`` failed without a transfer (their whole pool is down, their
        tape source was not brought online: ``error_class``)."""
        with self._lock:
            link = self._links[tier]
            link.queued -= files
            link.failed += files
            link.bytes_failed += nbytes
            if error_class:
                self._failures[error_class] = self._failures.get(error_class, 0) + files

    def archived(self, tier: str, size: int, *, ok: bool, error_class: str | None = None
                 ) -> None:
        """A file of ``tier`` left ``archiving``: on tape (done), or failed."""
        with self._lock:
            link = self._links[tier]
            link.archiving -= 1
            link.bytes_archiving -= size
            if ok:
                link.done += 1
                link.bytes_done += size
                return
            link.failed += 1
            link.bytes_failed += size
            key = error_class or "other"
            self._failures[key] = self._failures.get(key, 0) + 1

    def set_free(self, endpoint: str, free_bytes: int | None, now: float) -> None:
        self.meter.set_free(endpoint, free_bytes, now)

    def tick(self, now: float) -> None:
        """Sample the byte counters (call about once a second) for windowed rates."""
        with self._lock:
            total = 0
            for link in self._links.values():
                link.samples.append((now, link.moved))
                total += link.moved
            self._samples.append((now, total))

    # ---------------------------------------------------------- readers
    def pool_stats(self, pool: tuple[str, ...] | list[str], now: float) -> dict[str, EndpointStats]:
        snap = self.meter.snapshot(now)
        return {url: snap.get(url) or EndpointStats(url=url) for url in pool}

    def cap(self, tier: str) -> int:
        return self._links[tier].cap

    def queued(self, tier: str) -> int:
        return self._links[tier].queued

    def active(self, tier: str) -> int:
        return self._links[tier].active

    def link_sample(self, tier: str, now: float) -> LinkSample:
        """For the optimizer: counts since the previous call for this link."""
        with self._lock:
            link = self._links[tier]
            sample = LinkSample(tier=tier, active=link.active, rate=_rate(link.samples, now),
                                succeeded=link.ok_since, failed=link.failed_since,
                                queued=link.queued, moved=link.moved)
            link.ok_since = link.failed_since = 0
            return sample

    def snapshot(self, now: float) -> StatsSnapshot:
        with self._lock:
            links = tuple(LinkSnapshot(
                tier=t, active=l.active, cap=l.cap, reason=l.reason, queued=l.queued,
                files_total=l.files_total, done=l.done, failed=l.failed,
                bytes_total=l.bytes_total, bytes_done=l.bytes_done, rate=_rate(l.samples, now),
                archiving=l.archiving)
                for t, l in self._links.items())
            rate = _rate(self._samples, now)
            elapsed = max(0.0, now - self._started)
            moved = sum(l.moved for l in self._links.values())
            inflight = sum(l.active for l in self._links.values())
            total = sum(l.bytes_total for l in links)
            done_b = sum(l.bytes_done for l in links)
            failed_b = sum(l.bytes_failed for l in self._links.values())
            arch_b = sum(l.bytes_archiving for l in self._links.values())
            remaining = max(0, total - done_b - failed_b - arch_b)
            eta = remaining / rate if rate > 0 else None
            return StatsSnapshot(
                now=now, elapsed=elapsed, files_total=sum(l.files_total for l in links),
                files_done=sum(l.done for l in links), files_failed=sum(l.failed for l in links),
                files_active=inflight, bytes_total=total, bytes_done=done_b, rate=rate,
                mean_rate=moved / elapsed if elapsed > 0 else 0.0, eta=eta,
                retries=self._retries, failures=dict(self._failures), links=links,
                endpoints=tuple(self.meter.snapshot(now).values()),
                files_archiving=sum(l.archiving for l in links))


def _rate(samples: deque, now: float) -> float:
    """Bytes/s between the newest sample and the oldest one within RATE_WINDOW."""
    if len(samples) < 2:
        return 0.0
    t1, b1 = samples[-1]
    t0, b0 = samples[-2]
    for t, b in reversed(samples):
        if t1 - t > RATE_WINDOW:
            break
        t0, b0 = t, b
    return (b1 - b0) / (t1 - t0) if t1 > t0 else 0.0
