"""The DestinationSelector seam.

``choose(file, candidates, stats) -> endpoint``: given a file about to be dispatched
on a link (tier), the endpoints of that tier's pool that are eligible right now, and a
read-only snapshot of per-endpoint stats, return the endpoint to write to.

Issue 2 only needs round-robin; issue 3 adds least-pending and throughput-aware
(the default there) plus exclusions (circuit breaker, slow-drain, no-space).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Protocol, Sequence


@dataclass(frozen=True)
class FileToPlace:
    file_id: int
    name: str
    size: int


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


class DestinationSelector(Protocol):
    name: str

    def choose(self, file: FileToPlace, candidates: Sequence[str],
               stats: dict[str, EndpointStats]) -> str: ...


class RoundRobin:
    """The DNS-alias baseline the service challenge warns about. Kept for comparison."""

    name = "round-robin"

    def __init__(self) -> None:
        self._counter = itertools.count()

    def choose(self, file: FileToPlace, candidates: Sequence[str],
               stats: dict[str, EndpointStats]) -> str:
        if not candidates:
            raise ValueError("no candidate endpoints")
        return candidates[next(self._counter) % len(candidates)]


SELECTORS: dict[str, type] = {"round-robin": RoundRobin}


def make_selector(name: str) -> DestinationSelector:
    from ..errors import UsageError
    try:
        return SELECTORS[name]()
    except KeyError:
        raise UsageError(f"unknown selector {name!r}; choose from {', '.join(sorted(SELECTORS))}") from None


@dataclass(frozen=True)
class Exclusion:
    url: str
    reason: str                 # one line a site admin understands, e.g. "circuit open: 3 failures in a row"
    until: float | None         # unix time the endpoint is re-probed; None = until further notice


class ExclusionPolicy(Protocol):
    """Decides which endpoints of a pool are out of rotation right now (any selector)."""

    def eligible(self, candidates: Sequence[str], stats: dict[str, EndpointStats],
                 now: float) -> tuple[list[str], list[Exclusion]]: ...

    def record(self, url: str, ok: bool, error_class: str | None, now: float) -> None: ...


class NoExclusions:
    """Issue 2 default: every endpoint is always eligible."""

    def eligible(self, candidates: Sequence[str], stats: dict[str, EndpointStats],
                 now: float) -> tuple[list[str], list[Exclusion]]:
        return list(candidates), []

    def record(self, url: str, ok: bool, error_class: str | None, now: float) -> None:
        return None
