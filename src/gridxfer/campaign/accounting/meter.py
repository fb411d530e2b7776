"""Per-endpoint accounting for destination selection: ``EndpointMeter``.

The scheduler reports each transfer's start, progress (optional) and end; the meter
turns them into ``EndpointStats`` snapshots for the selectors and exclusion policies.

``throughput`` is the endpoint's *aggregate* rate (all its sessions together), what a
throttled or overloaded server really delivers: bytes written (progress, or the rest
of a file when it completes) divided by the time the endpoint had transfers in flight,
sampled when a snapshot is taken after at least ``window`` busy seconds in which some
bytes were written, smoothed with an EWMA. Counting busy time, not per-transfer
rates, keeps connection set-up, bursts and staggered sessions from inflating it.
``ewma_rate`` is the per-session rate. ``stalled``/``move_gap`` tell a hung endpoint (no
byte moves while transfers are in flight) from a slow one. Client-side progress runs ahead of the
server by up to ``progress_lag`` bytes, which are only credited at completion. Times
are passed in (``now``) so that tests can replay recorded events.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from collections.abc import Hashable

from gridxfer.campaign.policy.selection import EndpointStats


@dataclass
class _Flight:
    size: int
    done: int
    started: float


@dataclass
class _Acc:
    inflight: dict[Hashable, _Flight] = field(default_factory=dict)
    ewma_rate: float = 0.0
    throughput: float = 0.0
    completed: int = 0
    failures_in_row: int = 0
    free_bytes: int | None = None
    last_event: float = 0.0
    busy: float = 0.0          # busy seconds since the last throughput sample
    credited: int = 0          # bytes written since the last throughput sample
    busy_since: float = 0.0    # when it last went from idle to busy
    last_moved: float = 0.0    # when bytes last moved (progress or a completion)
    move_gap: float = 0.0      # EWMA of the gaps between movements while busy


# Bytes a client reports as copied before the server has them: XrdCl pipelines
# CPParallelChunks x CPChunkSize (4 x 8 MiB) and socket buffers hold more, so a small
# file reads "done" at once and then waits on a slow server. Progress only counts
# beyond this much; the rest is credited when the transfer completes.
PROGRESS_LAG = 32 * 2**20


class EndpointMeter:
    def __init__(self, alpha: float = 0.4, window: float = 2.0,
                 progress_lag: int = PROGRESS_LAG) -> None:
        self.alpha = alpha
        self.window = window
        self.progress_lag = progress_lag
        self._acc: dict[str, _Acc] = {}
        self._lock = threading.Lock()

    def _get(self, url: str, now: float) -> _Acc:
        acc = self._acc.get(url)
        if acc is None:
            acc = self._acc[url] = _Acc(last_event=now)
        if acc.inflight:
            acc.busy += max(0.0, now - acc.last_event)
        acc.last_event = max(acc.last_event, now)
        return acc

    def _ewma(self, old: float, sample: float) -> float:
        return sample if old <= 0 else self.alpha * sample + (1 - self.alpha) * old

    def _credit(self, acc: _Acc, nbytes: int, now: float) -> None:
        if nbytes <= 0:
            return
        gap = now - max(acc.last_moved, acc.busy_since)
        if gap > 0:
            acc.move_gap = self._ewma(acc.move_gap, gap)
        acc.last_moved = now
        acc.credited += nbytes

    def _sample(self, acc: _Acc) -> None:
        # at read time, so that transfers ending together are credited to one window
        if acc.busy >= self.window and acc.credited > 0:
            acc.throughput = self._ewma(acc.throughput, acc.credited / acc.busy)
            acc.busy, acc.credited = 0.0, 0

    def add_endpoint(self, url: str, now: float) -> None:
        with self._lock:
            self._get(url, now)

    def start(self, url: str, key: Hashable, size: int, now: float) -> None:
        with self._lock:
            acc = self._get(url, now)
            if not acc.inflight:
                acc.busy_since = now
            acc.inflight[key] = _Flight(max(0, size), 0, now)

    def progress(self, url: str, key: Hashable, done: int, now: float) -> None:
        with self._lock:
            acc = self._get(url, now)
            flight = acc.inflight.get(key)
            if flight is None:
                return
            done = min(done, flight.size) if flight.size else done
            done = max(0, done - self.progress_lag)          # what the server surely has
            if done > flight.done:
                self._credit(acc, done - flight.done, now)
                flight.done = done

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
                acc.completed += 1
                acc.failures_in_row = 0
                size = bytes_ if bytes_ is not None else (flight.size if flight else 0)
                self._credit(acc, max(0, size - (flight.done if flight else 0)), now)
                seconds = (now - flight.started) if flight else 0.0
                if size > 0 and seconds > 0:
                    acc.ewma_rate = self._ewma(acc.ewma_rate, size / seconds)
            elif counts_as_failure:
                acc.failures_in_row += 1

    def set_free(self, url: str, free_bytes: int | None, now: float) -> None:
        with self._lock:
            self._get(url, now).free_bytes = free_bytes

    def snapshot(self, now: float) -> dict[str, EndpointStats]:
        with self._lock:
            out = {}
            for url in list(self._acc):
                acc = self._get(url, now)
                self._sample(acc)
                out[url] = EndpointStats(
                    url=url, pending=len(acc.inflight),
                    pending_bytes=sum(f.size - f.done for f in acc.inflight.values()),
                    ewma_rate=acc.ewma_rate, completed=acc.completed,
                    failures_in_row=acc.failures_in_row, free_bytes=acc.free_bytes,
                    throughput=acc.throughput, move_gap=acc.move_gap,
                    stalled=(max(0.0, now - max(acc.last_moved, acc.busy_since))
                             if acc.inflight else 0.0))
            return out
