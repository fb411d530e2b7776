"""Per-link concurrency: how many transfers may be active on one link (tier) now.

The scheduler calls ``update(now, link)`` every second or so per link and uses the
returned ``Decision.active`` as that link's cap. Every decision that changes the cap
is journalled as an ``optimizer`` event with its reason (cf. FTS3 t_optimizer_evolution),
see ``decision_event``; ``link_status(conn)`` reads the latest one per link back.

``AdaptiveConcurrency`` is FTS3's idea (step the number of active transfers on a
throughput EMA and the success rate) on a short clock so it converges in seconds:

- every ``interval`` s (default 2) it takes the link's rate into an EMA; the first
  sample after a change is skipped, since new transfers need a moment to ramp up;
- a success rate below ``min_success`` in the interval: back off (-2, or halve);
- slow start: while each step up brings more than ``gain`` (10 %) more throughput,
  double the cap (+1..+2 at least); once a step brings no gain, go back to the best
  level seen, and from then on probe +1 every ``probe_every`` s (FTS3's additive step);
- a throughput collapse at a steady level (< ``drop`` x the rate it was chosen for)
  steps down by one;
- no change while the link is not using its cap (too few queued files): more slots
  would not be measured.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..units import fmt_rate


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


@dataclass
class _Link:
    cap: int
    reason: str
    next_at: float = 0.0
    settle: bool = True                 # skip the next sample (cap just changed)
    ema: float = 0.0
    rates: dict[int, float] = field(default_factory=dict)   # cap -> EMA measured there
    slow_start: bool = True
    probing_from: int | None = None     # cap we stepped up from, awaiting the verdict
    steady_rate: float = 0.0
    next_probe: float = 0.0
    succeeded: int = 0
    failed: int = 0


class AdaptiveConcurrency:
    def __init__(self, min_active: int, max_active: int, *, start: int | None = None,
                 interval: float = 2.0, alpha: float = 0.6, gain: float = 0.10,
                 min_success: float = 0.9, probe_every: float = 20.0,
                 drop: float = 0.6) -> None:
        self.min_active = max(1, min_active)
        self.max_active = max(self.min_active, max_active)
        self.start = self._clamp(start if start is not None else self.min_active)
        self.interval, self.alpha, self.gain = interval, alpha, gain
        self.min_success, self.probe_every, self.drop = min_success, probe_every, drop
        self._links: dict[str, _Link] = {}

    def _clamp(self, n: int) -> int:
        return max(self.min_active, min(self.max_active, n))

    def update(self, now: float, link: LinkSample) -> Decision:
        st = self._links.get(link.tier)
        if st is None:
            st = self._links[link.tier] = _Link(self.start, f"start at {self.start}",
                                                next_at=now + self.interval)
            return Decision(st.cap, st.reason)
        st.succeeded += link.succeeded
        st.failed += link.failed
        if now < st.next_at:
            return Decision(st.cap, st.reason)
        st.next_at = now + self.interval
        done, failed = st.succeeded, st.failed
        st.succeeded = st.failed = 0
        if st.settle:
            st.settle = False
            return Decision(st.cap, st.reason)
        st.ema = link.rate if st.ema <= 0 else self.alpha * link.rate + (1 - self.alpha) * st.ema
        new, why = self._decide(now, st, link, done, failed)
        if new != st.cap:
            st.cap, st.reason, st.settle, st.ema = new, why, True, 0.0
        return Decision(st.cap, st.reason)

    def _set(self, st: _Link, cap: int, why: str) -> tuple[int, str]:
        cap = self._clamp(cap)
        return (cap, why) if cap != st.cap else (cap, st.reason)

    def _best(self, st: _Link) -> int:
        """The fewest transfers that get within ``gain`` of the best rate seen."""
        top = max(st.rates.values())
        return min(c for c, r in st.rates.items() if r >= (1 - self.gain) * top)

    def _settle_at(self, now: float, st: _Link, cap: int) -> None:
        st.probing_from, st.slow_start = None, False
        st.steady_rate, st.next_probe = st.rates.get(cap, st.ema), now + self.probe_every

    def _decide(self, now: float, st: _Link, link: LinkSample, done: int,
                failed: int) -> tuple[int, str]:
        rate, cap = st.ema, st.cap
        if failed and done / (done + failed) < self.min_success:
            ratio = done / (done + failed)
            st.rates.clear()
            st.probing_from, st.slow_start, st.steady_rate = None, False, 0.0
            st.next_probe = now + self.probe_every
            return self._set(st, min(cap - 2, cap // 2) if ratio < 0.5 else cap - 2,
                             f"success rate {ratio:.0%} < {self.min_success:.0%} "
                             f"({failed} failed): back off")
        if link.active < cap and link.queued == 0:
            return cap, st.reason          # not using its slots: nothing to learn
        if st.probing_from is not None:
            prev = st.probing_from
            base = st.rates.get(prev, 0.0)
            st.rates[cap] = rate
            if rate > base * (1 + self.gain) and cap < self.max_active:
                step = cap if st.slow_start else 1
                st.probing_from = cap
                return self._set(st, cap + step, f"{fmt_rate(rate)} at {cap} > {fmt_rate(base)} "
                                 f"at {prev}: +{min(step, self.max_active - cap)}")
            best = self._best(st)
            self._settle_at(now, st, best)
            if best == cap:
                why = (f"at max_active {cap} ({fmt_rate(rate)})" if cap >= self.max_active
                       else f"converged at {cap} ({fmt_rate(rate)})")
                return cap, why
            return self._set(st, best, f"no gain at {cap} ({fmt_rate(rate)} vs "
                             f"{fmt_rate(base)} at {prev}): back to {best}")
        if st.steady_rate > 0 and rate < self.drop * st.steady_rate and cap > self.min_active:
            before, st.steady_rate = st.steady_rate, rate
            st.rates.clear()
            st.next_probe = now + self.probe_every
            return self._set(st, cap - 1, f"throughput fell to {fmt_rate(rate)} from "
                             f"{fmt_rate(before)}: -1")
        if cap < self.max_active and now >= st.next_probe:
            st.rates[cap] = rate
            st.probing_from = cap
            step = cap if st.slow_start else 1
            word = "slow start" if st.slow_start else "probe"
            return self._set(st, cap + step, f"{word}: {fmt_rate(rate)} at {cap}, "
                             f"trying {self._clamp(cap + step)}")
        if st.steady_rate <= 0:
            st.steady_rate = rate
        return cap, st.reason

OPTIMIZERS: dict[str, type] = {"adaptive": AdaptiveConcurrency, "fixed": FixedConcurrency}
DEFAULT_OPTIMIZER = "adaptive"


def make_optimizer(name: str, min_active: int, max_active: int) -> ConcurrencyOptimizer:
    from ..errors import UsageError
    try:
        return OPTIMIZERS[name](min_active, max_active)
    except KeyError:
        raise UsageError(f"unknown optimizer {name!r}; choose from "
                         f"{', '.join(sorted(OPTIMIZERS))}") from None


def decision_event(link: LinkSample, previous: int, decision: Decision) -> dict[str, Any]:
    """The ``detail`` of an ``optimizer`` journal event (``journal.add_event(conn, "optimizer", **d)``)."""
    return {"tier": link.tier, "active": decision.active, "previous": previous,
            "reason": decision.reason, "rate": round(link.rate, 1), "in_flight": link.active,
            "queued": link.queued, "succeeded": link.succeeded, "failed": link.failed}


@dataclass(frozen=True)
class LinkState:
    tier: str
    active: int
    reason: str
    since: float
    decisions: int


def link_status(conn: sqlite3.Connection) -> list[LinkState]:
    """Current concurrency per link and why: the latest ``optimizer`` event per tier."""
    latest: dict[str, LinkState] = {}
    for row in conn.execute("SELECT ts, detail FROM events WHERE kind = 'optimizer' ORDER BY id"):
        d = json.loads(row["detail"])
        tier = str(d.get("tier", "?"))
        n = latest[tier].decisions + 1 if tier in latest else 1
        latest[tier] = LinkState(tier, int(d.get("active", 0)), str(d.get("reason", "")),
                                 float(row["ts"]), n)
    return [latest[t] for t in sorted(latest)]
