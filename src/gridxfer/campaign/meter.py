"""Per-endpoint accounting for destination selection: ``EndpointMeter``.

The scheduler reports each transfer's start, progress (optional) and end; the meter
turns them into ``EndpointStats`` snapshots for the selectors and exclusion policies.

``throughput`` is the endpoint's *aggregate* rate (all its sessions together), what a
throttled or overloaded server really delivers. Each completed transfer gives one
sample: its own rate times the mean number of sessions the endpoint held while it ran
(exact when a server shares a fixed capacity among its sessions, as XRootD's throttle
or a saturated disk does), smoothed with an EWMA. ``ewma_rate`` is the per-session
rate. ``stalled``/``move_gap`` tell a hung endpoint (no byte moves while transfers are
in flight) from a slow one. Times are passed in (``now``) so that tests can replay
recorded events.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Hashable

from .selection import EndpointStats


@dataclass
class _Flight:
    size: int
    done: int
    started: float
    load_at_start: float       # the endpoint's session-seconds integral at start


@dataclass
class _Acc:
    inflight: dict[Hashable, _Flight] = field(default_factory=dict)
    ewma_rate: float = 0.0
    throughput: float = 0.0
    completed: int = 0
    failures_in_row: int = 0
    free_bytes: int | None = None
    last_event: float = 0.0
    load: float = 0.0          # integral of sessions in flight over time (session-seconds)
    busy_since: float = 0.0    # when it last went from idle to busy
    last_moved: float = 0.0    # when bytes last moved (progress or a completion)
    move_gap: float = 0.0      # EWMA of the gaps between movements while busy


class EndpointMeter:
    def __init__(self, alpha: float = 0.3) -> None:
        self.alpha = alpha
        self._acc: dict[str, _Acc] = {}
        self._lock = threading.Lock()

    def _get(self, url: str, now: float) -> _Acc:
        acc = self._acc.get(url)
        if acc is None:
            acc = self._acc[url] = _Acc(last_event=now)
        acc.load += len(acc.inflight) * max(0.0, now - acc.last_event)
        acc.last_event = max(acc.last_event, now)
        return acc

    def _ewma(self, old: float, sample: float) -> float:
        return sample if old <= 0 else self.alpha * sample + (1 - self.alpha) * old

    def add_endpoint(self, url: str, now: float) -> None:
        with self._lock:
            self._get(url, now)

    def start(self, url: str, key: Hashable, size: int, now: float) -> None:
        with self._lock:
            acc = self._get(url, now)
            if not acc.inflight:
                acc.busy_since = now
            acc.inflight[key] = _Flight(max(0, size), 0, now, acc.load)

    def progress(self, url: str, key: Hashable, done: int, now: float) -> None:
        with self._lock:
            acc = self._get(url, now)
            flight = acc.inflight.get(key)
            if flight is not None and done > flight.done:
                flight.done = min(done, flight.size) if flight.size else done
                self._moved(acc, now)

    def end(self, url: str, key: Hashable, ok: bool, now: float, *,
            bytes_: int | None = None, counts_as_failure: bool = True) -> None:
        """A transfer ended (``bytes_``: bytes written, default its size).

        ``counts_as_failure=False`` for failures that are not the endpoint's fault
        (source missing, cancelled by the user).
        """
        with self._lock:
            acc = self._get(url, now)
            flight = acc.inflight.pop(key, None)
            if ok:
                self._moved(acc, now)
                acc.completed += 1
                acc.failures_in_row = 0
                size = bytes_ if bytes_ is not None else (flight.size if flight else 0)
                seconds = (now - flight.started) if flight else 0.0
                if flight and size > 0 and seconds > 0:
                    rate = size / seconds
                    sessions = max(1.0, (acc.load - flight.load_at_start) / seconds)
                    acc.ewma_rate = self._ewma(acc.ewma_rate, rate)
                    acc.throughput = self._ewma(acc.throughput, rate * sessions)
            elif counts_as_failure:
                acc.failures_in_row += 1

    def _moved(self, acc: _Acc, now: float) -> None:
        gap = now - max(acc.last_moved, acc.busy_since)
        if gap > 0:
            acc.move_gap = self._ewma(acc.move_gap, gap)
        acc.last_moved = now

    def set_free(self, url: str, free_bytes: int | None, now: float) -> None:
        with self._lock:
            self._get(url, now).free_bytes = free_bytes

    def snapshot(self, now: float) -> dict[str, EndpointStats]:
        with self._lock:
            out = {}
            for url in list(self._acc):
                acc = self._get(url, now)
                out[url] = EndpointStats(
                    url=url, pending=len(acc.inflight),
                    pending_bytes=sum(f.size - f.done for f in acc.inflight.values()),
                    ewma_rate=acc.ewma_rate, completed=acc.completed,
                    failures_in_row=acc.failures_in_row, free_bytes=acc.free_bytes,
                    throughput=acc.throughput, move_gap=acc.move_gap,
                    stalled=(max(0.0, now - max(acc.last_moved, acc.busy_since))
                             if acc.inflight else 0.0))
            return out
