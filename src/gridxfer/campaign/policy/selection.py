"""The DestinationSelector seam.

``choose(file, candidates, stats) -> endpoint``: given a file about to be dispatched
on a link (tier), the endpoints of that tier's pool that are eligible right now (the
``ExclusionPolicy`` has already removed the excluded ones, see ``exclusions.py``), and
a read-only snapshot of per-endpoint stats, return the endpoint to write to.

Selectors (``SELECTORS``, ``make_selector(name)``):

- ``round-robin``: the DNS-alias baseline the CERN->CNAF service challenge warns about.
- ``least-pending``: that challenge's fix, load = sessions in flight to the endpoint.
- ``throughput-aware`` (``DEFAULT_SELECTOR``): the endpoint where this file would
  *finish first*, estimated as (pending bytes + file size) / endpoint throughput.

Ties are spread by rotating among the tied endpoints, so a fresh pool is not piled
onto its first endpoint. Every selector is stateful only for that rotation.

The scheduler fills ``EndpointStats``; ``EndpointMeter`` (``meter.py``) is one way to
do it from start/progress/end events.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Protocol
from collections.abc import Sequence


@dataclass(frozen=True)
class FileToPlace:
    file_id: int
    name: str
    size: int
    # bytes still waiting on this link after this file (0 = none, or not known)
    backlog_bytes: int = 0


@dataclass(frozen=True)
class EndpointStats:
    """A snapshot for one endpoint, as the scheduler's accounting sees it."""

    url: str
    pending: int = 0            # sessions in flight to this endpoint
    pending_bytes: int = 0      # bytes not yet written by those sessions
    ewma_rate: float = 0.0      # bytes/s per session, EWMA over completed transfers (0 = unknown)
    completed: int = 0
    failures_in_row: int = 0
    free_bytes: int | None = None
    # Aggregate bytes/s the endpoint sustains while it has work (all its sessions
    # together), EWMA; 0 = unknown. What a throttled or overloaded server really gives.
    throughput: float = 0.0
    # Seconds since bytes last moved to this endpoint while it had transfers in flight
    # (0 when idle), and the usual gap between such movements (EWMA; 0 = unknown).
    stalled: float = 0.0
    move_gap: float = 0.0


def capacity(stats: EndpointStats | None) -> float:
    """Best estimate of an endpoint's aggregate bytes/s, 0.0 when unknown.

    ``throughput`` when the accounting provides it; otherwise the per-session EWMA
    times the sessions that shared the endpoint (an aggregate-limited server gives each
    of its n sessions 1/n of its capacity).
    """
    if stats is None:
        return 0.0
    if stats.throughput > 0:
        return stats.throughput
    if stats.ewma_rate > 0:
        return stats.ewma_rate * max(1, stats.pending)
    return 0.0


class DestinationSelector(Protocol):
    name: str

    def choose(self, file: FileToPlace, candidates: Sequence[str],
               stats: dict[str, EndpointStats]) -> str: ...


def _require(candidates: Sequence[str]) -> None:
    if not candidates:
        raise ValueError("no candidate endpoints")


class _TieSpreader:
    """Pick the lowest score; rotate among endpoints whose scores tie."""

    def __init__(self, rel_tol: float = 1e-6) -> None:
        self._counter = itertools.count()
        self._rel_tol = rel_tol

    def pick(self, candidates: Sequence[str], scores: Sequence[float]) -> str:
        best = min(scores)
        tied = [c for c, s in zip(candidates, scores, strict=True)
                if s == best or (math.isfinite(best)
                                 and math.isclose(s, best, rel_tol=self._rel_tol, abs_tol=1e-9))]
        return tied[next(self._counter) % len(tied)]


class RoundRobin:
    """The DNS-alias baseline the service challenge warns about. Kept for comparison."""

    name = "round-robin"

    def __init__(self) -> None:
        self._counter = itertools.count()

    def choose(self, file: FileToPlace, candidates: Sequence[str],
               stats: dict[str, EndpointStats]) -> str:
        _require(candidates)
        return candidates[next(self._counter) % len(candidates)]


class LeastPending:
    """Fewest sessions in flight (the seed's load measure); then fewest pending bytes."""

    name = "least-pending"

    def __init__(self) -> None:
        self._ties = _TieSpreader()

    def choose(self, file: FileToPlace, candidates: Sequence[str],
               stats: dict[str, EndpointStats]) -> str:
        _require(candidates)
        snaps = [stats.get(c) or EndpointStats(url=c) for c in candidates]
        # pending sessions dominate; pending bytes (scaled into [0, 0.5]) only break
        # ties between equal session counts
        scale = 2.0 * (1 + max(s.pending_bytes for s in snaps))
        scores = [s.pending + s.pending_bytes / scale for s in snaps]
        return self._ties.pick(candidates, scores)


class ThroughputAware:
    """The endpoint where this file is estimated to finish first.

    finish(e) = (pending_bytes(e) + file.size) / capacity(e): the endpoint's queue of
    unwritten bytes drains at its aggregate throughput, and this file joins it. A slow
    endpoint therefore gets a share of files proportional to its speed, and is given a
    file only when it would still finish it before a faster one would.

    With a per-link cap on active transfers the queues stay short, so earliest-finish
    alone would leave a slow endpoint idle while files wait. When the scheduler says how
    much work is still waiting (``FileToPlace.backlog_bytes``), the pool cannot finish
    before drain = (all pending + this file + backlog) / sum of capacities; every
    endpoint that would finish this file by then is as good for the makespan, and the
    least loaded of them (earliest start) gets it, so that no endpoint idles. Near the
    end (drain close) this becomes earliest-finish again, which protects the tail.

    Unknown endpoints (no throughput measured yet) are probed with an optimistic prior:
    they are assumed as fast as the fastest known endpoint of the pool, but hold at most
    ``probe_sessions`` sessions until their throughput is known, so a slow unknown
    endpoint cannot swallow a pile of files before its first one completes. When no
    endpoint of the pool is known yet, the choice is least-pending.
    """

    name = "throughput-aware"

    def __init__(self, probe_sessions: int = 1) -> None:
        self.probe_sessions = probe_sessions
        self._ties = _TieSpreader()
        self._fallback = LeastPending()

    def estimate(self, file: FileToPlace, stats: EndpointStats | None,
                 prior: float) -> float:
        """Seconds until ``file`` would be written on this endpoint (inf = don't)."""
        st = stats or EndpointStats(url="")
        cap = capacity(st)
        if cap <= 0:
            if st.pending >= self.probe_sessions:
                return math.inf
            cap = prior
        return (st.pending_bytes + max(file.size, 1)) / cap

    def choose(self, file: FileToPlace, candidates: Sequence[str],
               stats: dict[str, EndpointStats]) -> str:
        _require(candidates)
        known = [capacity(stats.get(c)) for c in candidates]
        prior = max(known)
        if prior <= 0:   # nothing measured yet in this pool
            return self._fallback.choose(file, candidates, stats)
        scores = [self.estimate(file, stats.get(c), prior) for c in candidates]
        if all(math.isinf(s) for s in scores):   # only busy unknown endpoints left
            return self._fallback.choose(file, candidates, stats)
        if file.backlog_bytes > 0:
            caps = [capacity(stats.get(c)) or prior for c in candidates]
            queued = sum((stats.get(c) or EndpointStats(url=c)).pending_bytes for c in candidates)
            drain = (queued + file.size + file.backlog_bytes) / sum(caps)
            early = [i for i, sc in enumerate(scores) if sc <= drain]
            if early:
                starts = [scores[i] - max(file.size, 1) / caps[i] for i in early]
                return self._ties.pick([candidates[i] for i in early], starts)
        return self._ties.pick(candidates, scores)


SELECTORS: dict[str, type] = {
    "round-robin": RoundRobin,
    "least-pending": LeastPending,
    "throughput-aware": ThroughputAware,
}
DEFAULT_SELECTOR = "throughput-aware"


def make_selector(name: str = DEFAULT_SELECTOR) -> DestinationSelector:
    from gridxfer.errors import UsageError
    try:
        return SELECTORS[name]()
    except KeyError:
        raise UsageError(
            f"unknown selector {name!r}; choose from {', '.join(sorted(SELECTORS))}"
        ) from None


@dataclass(frozen=True)
class Exclusion:
    url: str
    # one line a site admin understands, e.g. "circuit open: 3 failures in a row"
    reason: str
    until: float | None         # unix time the endpoint is re-probed; None = until further notice


@dataclass(frozen=True)
class EndpointDown:
    """An endpoint that failed and has not written a file since (not merely busy or slow)."""
    url: str
    since: float                # when it went down
    error_class: str            # ErrorClass value of the failure that took it down
    # one line, e.g. "circuit open: 1 failure in a row (last: connection)"
    reason: str


class ExclusionPolicy(Protocol):
    """Decides which endpoints of a pool are out of rotation right now (any selector).

    ``file`` (optional) is the file about to be placed, so that an endpoint without room
    for it can be skipped; without it only endpoints that are already full are skipped.
    """

    def eligible(self, candidates: Sequence[str], stats: dict[str, EndpointStats],
                 now: float, file: FileToPlace | None = None
                 ) -> tuple[list[str], list[Exclusion]]: ...

    def record(self, url: str, ok: bool, error_class: str | None, now: float) -> None: ...

    # Optional: ``down(url, now) -> EndpointDown | None``. A policy that has it lets the
    # scheduler tell a pool that is down from one that is busy (``pooldown.py``).


class NoExclusions:
    """Every endpoint is always eligible (the pure DNS-alias baseline)."""

    def eligible(self, candidates: Sequence[str], stats: dict[str, EndpointStats],
                 now: float, file: FileToPlace | None = None
                 ) -> tuple[list[str], list[Exclusion]]:
        return list(candidates), []

    def record(self, url: str, ok: bool, error_class: str | None, now: float) -> None:
        return None
