"""Per-link concurrency: how many transfers may be active on one link (tier) now.

The scheduler calls ``update(now, link)`` every second or so per link and uses the
returned ``Decision.active`` as that link's cap. Every decision that changes the cap
is journalled as an ``optimizer`` event with its reason (cf. FTS3 t_optimizer_evolution),
see ``optimizer_log.decision_event``; ``optimizer_log.link_status(conn)`` reads the latest
one per link back.

``AdaptiveConcurrency`` is FTS3's idea (step the number of active transfers on a
throughput EMA and the success rate) on a short clock, with a search that converges in
seconds instead of FTS3's +-1..2 per minute:

- every ``interval`` s (default 1.5) it takes the link's rate into an EMA; the first
  sample after a change is skipped, since new transfers need a moment to ramp up;
- start at half of ``max_active`` (at least 2; a tier without ``max_active`` starts at a
  quarter of its default ceiling, at least ``START_MAX``: engine/ceilings.py), so that a
  short campaign is not spent ramping up; slow start: double the cap while each doubling
  brings more than ``gain`` (10 %);
- short files (issue 21): while the link's transfers end in under half an interval (at
  least 2 x cap finished in it), slow start multiplies by ``SHORT_RAMP`` (4) instead, and
  no sample is skipped after a change, the first included, and the interval is halved
  (short transfers reach their rate at once, and hundreds end in 0.75 s): 32 -> 128 takes
  one interval, and the search settles within 10 s (a 20,000-file run over the 20 ms
  testbed settled at 10.05 s with full intervals, bench.smallfiles --wan). The reason says
  so ("short files"). The first interval's warm-up ends early once ``EARLY_SHORT`` x cap
  transfers have ended in it: a 3 s run of 2,000 x 4 KB spent 2 s at its start level. A
  decision's ``ask_in`` says when to be asked next (every ``WARM_ASK`` s in the warm-up,
  then at the interval's end), so the steering does not hold it to its 1 s period;
- refine: then bisect between the measured levels around the best one (and below the
  start), towards the more promising side, until its neighbours are measured (to within a
  quarter of the level: 96 vs 128 is close enough); settle on the *fewest* transfers
  within ``gain`` of the best rate (sessions cost the servers);
- steady: probe +1 every ``probe_every`` s, keep it only if it gains (FTS3's step);
  a throughput collapse (< ``drop`` x the rate the level was chosen for) steps down;
- a success rate below ``min_success`` in an interval (and at least 2 failures):
  back off (-1, or halve below 50 %), whatever the phase, then probe up again two
  intervals later (failures often come from one endpoint that gets excluded);
- no change while the link is not using its cap (too few queued files): more slots
  would not be measured.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from gridxfer.units import fmt_rate

START_MAX = 8           # the first cap under a default ceiling (a high ceiling is not a start)
SHORT_RAMP = 4          # slow start's factor while transfers are short
EARLY_SHORT = 4         # the warm-up ends as soon as this many x cap transfers ended in it
WARM_ASK = 0.25         # s: how often a link in its warm-up is looked at (for EARLY_SHORT)


@dataclass(frozen=True)
class LinkSample:
    """What the scheduler's accounting knows about one link at ``now``."""

    tier: str
    active: int                 # transfers in flight
    rate: float                 # aggregate bytes/s over the last few seconds
    succeeded: int              # completed OK since the previous update
    failed: int                 # failed since the previous update
    queued: int                 # files still waiting on this link
    # monotonic count of bytes moved on the link (progress included), -1 = not known.
    # With it the optimizer measures the rate over exactly its own interval, so a
    # window that straddles a change of cap does not blur the verdict.
    moved: int = -1


@dataclass(frozen=True)
class Decision:
    active: int
    reason: str
    # seconds until this optimizer wants its next sample; None: the steering's period (1 s)
    ask_in: float | None = None


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
    mark: tuple[float, int] | None = None   # (time, moved) at the previous sample
    ema: float = 0.0
    samples: int = 0                    # samples in ``ema`` since the cap changed
    rates: dict[int, float] = field(default_factory=dict)   # cap -> EMA measured there
    phase: str = "slow-start"           # slow-start | refine | steady | probe
    steady_rate: float = 0.0
    next_probe: float = 0.0
    succeeded: int = 0
    failed: int = 0
    done: int = 0                       # transfers finished in the last interval
    window_from: float = 0.0            # when that interval began
    window: float = 0.0                 # its length (the warm-up may end early)
    warming: bool = True                # still in the first interval (no sample taken)


class AdaptiveConcurrency:
    def __init__(self, min_active: int, max_active: int, *, start: int | None = None,
                 interval: float = 1.5, alpha: float = 0.6, gain: float = 0.10,
                 min_success: float = 0.9, probe_every: float = 20.0,
                 drop: float = 0.6) -> None:
        self.min_active = max(1, min_active)
        self.max_active = max(self.min_active, max_active)
        self.start = self._clamp(start if start is not None else max(2, self.max_active // 2))
        self.interval, self.alpha, self.gain = interval, alpha, gain
        self.min_success, self.probe_every, self.drop = min_success, probe_every, drop
        self._links: dict[str, _Link] = {}

    def _clamp(self, n: int) -> int:
        return max(self.min_active, min(self.max_active, n))

    def update(self, now: float, link: LinkSample) -> Decision:
        st = self._links.get(link.tier)
        if st is None:
            st = self._links[link.tier] = _Link(self.start, f"start at {self.start}",
                                                next_at=now + self.interval, window_from=now)
            if link.moved >= 0:             # the warm-up's rate, however early it ends
                st.mark = (now, link.moved)
            return self._answer(now, st)            # the first interval is a warm-up
        st.succeeded += link.succeeded
        st.failed += link.failed
        warm_up_over = st.warming and st.succeeded + st.failed >= EARLY_SHORT * st.cap
        if now < st.next_at and not warm_up_over:
            return self._answer(now, st)
        first, st.warming = st.warming, False
        done, failed = st.succeeded, st.failed
        st.succeeded = st.failed = 0
        st.window, st.window_from = now - st.window_from, now
        st.done = done + failed
        # short transfers: hundreds end per interval, half of one measures them as well
        st.next_at = now + (self.interval / 2 if st.done >= 2 * st.cap else self.interval)
        rate = link.rate
        if link.moved >= 0:
            if st.mark is not None and now > st.mark[0]:
                rate = max(0.0, (link.moved - st.mark[1]) / (now - st.mark[0]))
                st.settle = st.settle and first  # a window from a change: no blur
            st.mark = (now, link.moved)
        if failed >= 2 and done / (done + failed) < self.min_success:
            new, why = self._back_off(now, st, done, failed)
        elif (st.settle and st.done < 2 * st.cap) or (link.active < st.cap and link.queued == 0):
            st.settle = False               # ramping up, or nothing to learn from
            return self._answer(now, st)
        else:
            st.ema = rate if st.samples == 0 else (self.alpha * rate
                                                    + (1 - self.alpha) * st.ema)
            st.samples += 1
            new, why = self._decide(now, st)
        if new != st.cap:
            st.cap, st.reason, st.settle, st.ema, st.samples = new, why, True, 0.0, 0
        elif why:
            st.reason = why
        return self._answer(now, st)

    @staticmethod
    def _answer(now: float, st: _Link) -> Decision:
        """The cap, and when to be asked next: every ``WARM_ASK`` s in the warm-up (its
        early end), else at the interval's end (half intervals are shorter than 1 s)."""
        return Decision(st.cap, st.reason,
                        WARM_ASK if st.warming else max(WARM_ASK, st.next_at - now))

    def _back_off(self, now: float, st: _Link, done: int, failed: int) -> tuple[int, str]:
        ratio = done / (done + failed)
        st.rates.clear()
        # failures are often one bad endpoint, soon excluded: probe back up early
        st.phase, st.steady_rate, st.next_probe = "steady", 0.0, now + 2 * self.interval
        new = self._clamp(st.cap // 2 if ratio < 0.5 else st.cap - 1)
        return new, (f"success rate {ratio:.0%} < {self.min_success:.0%} ({failed} failed): "
                     f"{st.cap} -> {new}")

    def _best(self, st: _Link) -> int:
        """The fewest transfers that get within ``gain`` of the best rate seen."""
        top = max(st.rates.values())
        return min(c for c, r in st.rates.items() if r >= (1 - self.gain) * top)

    def _bisect(self, st: _Link) -> int | None:
        """Next level to try around the best one, or None when its neighbours are known."""
        best = self._best(st)
        below = [c for c in st.rates if c < best]
        above = [c for c in st.rates if c > best]
        options = []
        close = max(2, best // 4)           # a quarter of the level is close enough
        if below and best - max(below) >= close:
            lo = max(below)
            options.append((st.rates[lo], (lo + best) // 2))
        elif not below and best > self.min_active and best // 2 not in st.rates:
            # the lowest level tried is already as good as any: the knee may be lower
            options.append((0.0, max(self.min_active, best // 2)))
        if above and min(above) - best >= close:
            hi = min(above)
            if st.rates[hi] < (1 - self.gain) * st.rates[best]:   # a peak may hide there
                options.append((st.rates[hi], (best + hi) // 2))
        return max(options)[1] if options else None

    def _decide(self, now: float, st: _Link) -> tuple[int, str]:
        rate, cap = st.ema, st.cap
        where = f"{fmt_rate(rate)} at {cap}"
        if st.phase == "steady":
            if st.steady_rate > 0 and rate < self.drop * st.steady_rate and cap > self.min_active:
                before, st.steady_rate = st.steady_rate, 0.0   # re-baselined at the new level
                st.rates = {cap: rate}
                st.next_probe = now + self.probe_every
                return cap - 1, f"throughput fell to {where} from {fmt_rate(before)}: -1"
            if cap < self.max_active and now >= st.next_probe:
                st.rates[cap], st.phase = rate, "probe"
                return cap + 1, f"probe: {where}, trying {cap + 1}"
            if st.steady_rate <= 0:
                st.steady_rate = rate
            return cap, ""
        prev = max((c for c in st.rates if c < cap), default=None)
        st.rates[cap] = rate
        gained = prev is not None and rate > st.rates[prev] * (1 + self.gain)
        vs = "" if prev is None else f" vs {fmt_rate(st.rates[prev])} at {prev}"
        if st.phase == "slow-start" and (prev is None or gained) and cap < self.max_active:
            if st.done >= 2 * cap:
                nxt = self._clamp(SHORT_RAMP * cap)
                return nxt, (f"short files ({st.done} ended in {st.window:.1f} s): slow "
                             f"start x{SHORT_RAMP}: {where}{vs}, trying {nxt}")
            nxt = self._clamp(2 * cap)
            return nxt, f"slow start: {where}{vs}, trying {nxt}"
        if st.phase == "probe" and prev is not None:
            if st.samples < 2:              # a +1 gain is small: measure it twice
                del st.rates[cap]
                return cap, ""
            if gained and cap < self.max_active:
                return cap + 1, f"probe: {where}{vs}, trying {cap + 1}"
            best = cap if gained else prev
            st.phase, st.steady_rate = "steady", st.rates[best]
            st.next_probe = now + self.probe_every
            return best, (f"kept {cap}: {where}{vs}" if gained else f"no gain at {cap} "
                          f"({fmt_rate(rate)}{vs}): back to {prev}")
        if st.phase in ("slow-start", "refine"):
            st.phase = "refine"
            trial = self._bisect(st)
            if trial is not None:
                return trial, f"refine: {where}{vs}, trying {trial}"
        best = self._best(st)
        st.phase, st.steady_rate = "steady", st.rates[best]
        st.next_probe = now + self.probe_every
        if best == cap:
            return cap, f"converged at {cap} ({fmt_rate(rate)})"
        return best, f"settled on {best} ({fmt_rate(st.rates[best])}; {where})"


OPTIMIZERS: dict[str, type] = {"adaptive": AdaptiveConcurrency, "fixed": FixedConcurrency}
DEFAULT_OPTIMIZER = "adaptive"


def make_optimizer(name: str, min_active: int, max_active: int, *,
                   start: int | None = None) -> ConcurrencyOptimizer:
    """``start``: the first cap (adaptive only; None: half of ``max_active``)."""
    from gridxfer.errors import UsageError
    try:
        cls = OPTIMIZERS[name]
        if start is not None and cls is AdaptiveConcurrency:
            return AdaptiveConcurrency(min_active, max_active, start=start)
        return cls(min_active, max_active)
    except KeyError:
        raise UsageError(f"unknown optimizer {name!r}; choose from "
                         f"{', '.join(sorted(OPTIMIZERS))}") from None
