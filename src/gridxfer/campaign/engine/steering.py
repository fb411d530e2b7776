"""The concurrency of every link, decided on the dispatcher's loop: once a second, or
sooner when an optimizer asks (``Decision.ask_in``: a warm-up looks every 0.25 s).

Each tier's optimizer (``policy/optimizer.py``) reads its link's sample and answers a
number of transfers; it is held to ``1 .. max_active`` (a tier without ``max_active``
has the ceiling ``ceilings.py`` gave it), the slots take it as the link's cap, the
accounting records it, and a change becomes an ``optimizer`` journal event with its
reason (``campaign report`` and ``status`` read the trail back).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gridxfer.campaign.accounting.stats import Accounting
from gridxfer.campaign.engine.factories import close_plugins
from gridxfer.campaign.engine.slots import LinkSlots
from gridxfer.campaign.policy import optimizer as optimizer_mod, optimizer_log
from gridxfer.campaign.spec.schema import TierSpec

OPTIMIZER_PERIOD = 1.0       # seconds between optimizer updates per link, at most
MIN_ASK = 0.1                # and at least

Event = tuple[str, dict[str, Any]]


class Steering:
    """One optimizer per tier and when it is next asked. Dispatcher thread only."""

    def __init__(self, tiers: Mapping[str, TierSpec],
                 factory: Callable[[TierSpec], optimizer_mod.ConcurrencyOptimizer]) -> None:
        self.tiers = tiers
        self.optimizers = {name: factory(t) for name, t in tiers.items()}
        self._next = dict.fromkeys(tiers, 0.0)

    def step(self, now: float, acct: Accounting, slots: LinkSlots) -> list[Event]:
        """Ask every link whose period is over; the journal events of the caps changed."""
        events: list[Event] = []
        for tier, opt in self.optimizers.items():
            if now < self._next[tier]:
                continue
            sample = acct.link_sample(tier, now)
            decision = opt.update(now, sample)
            ask = OPTIMIZER_PERIOD if decision.ask_in is None else decision.ask_in
            self._next[tier] = now + min(OPTIMIZER_PERIOD, max(MIN_ASK, ask))
            active = max(1, min(decision.active, self.tiers[tier].max_active))
            decision = optimizer_mod.Decision(active, decision.reason, decision.ask_in)
            slots.set_cap(tier, active)
            prev = acct.cap(tier)
            if active != prev:
                acct.set_cap(tier, active, decision.reason)
                events.append(("optimizer", optimizer_log.decision_event(sample, prev, decision)))
        return events

    def due(self) -> float:
        """When the next link is to be asked (the dispatcher's loop sleeps no longer)."""
        return min(self._next.values(), default=float("inf"))

    def close(self) -> None:
        """Optimizers with a ``close()`` (a plug-in's own thread or file) are closed."""
        close_plugins(self.optimizers.values())
