"""Per-link concurrency: how many transfers may be active on one link (tier) now.

The scheduler calls ``update(now, link)`` every few seconds per link and uses the
returned ``Decision.active`` as that link's cap. Every decision that changes the cap
is journalled as an ``optimizer`` event with its reason (cf. FTS3 t_optimizer_evolution).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class LinkSample:
    """What the scheduler's accounting knows about one link at ``now``."""

    tier: str
    active: int                 # transfers in flight
    rate: float                 # aggregate bytes/s over the last few seconds
    succeeded: int              # completed OK since the previous update
    failed: int                 # failed since the previous update
    queued: int                 # files still waiting on this link


@dataclass(frozen=True)
class Decision:
    active: int
    reason: str


class ConcurrencyOptimizer(Protocol):
    def update(self, now: float, link: LinkSample) -> Decision: ...


class FixedConcurrency:
    """Always ``max_active`` (issue 2 behaviour)."""

    def __init__(self, min_active: int, max_active: int) -> None:
        self.max_active = max_active

    def update(self, now: float, link: LinkSample) -> Decision:
        return Decision(self.max_active, "fixed at max_active")
