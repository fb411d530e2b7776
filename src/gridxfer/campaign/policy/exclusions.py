"""Taking endpoints out of rotation, whatever the selector: ``DefaultExclusions``.

Three rules, checked in this order for each candidate of a pool:

1. **No space.** The free bytes (``EndpointStats.free_bytes`` or, when the scheduler
   does not fill it, the policy's own ``SpaceWatcher``: XRootD ``query space``,
   ``statvfs``, a mover's ``space()``) minus the bytes already on their way there is
   less than the file (or, when the file is not given, the largest transfer seen in
   flight) plus a reserve of ``min_free_bytes``; writes that ended since the last
   reading are subtracted until the next one (an ended write triggers one where space is
   tight: room for fewer than ``REFRESH_HEADROOM`` typical writes). Or the
   last write failed with ``NO_SPACE``: excluded for ``space_cooldown`` s, then probed
   again.
2. **Circuit breaker.** ``failure_threshold`` failures in a row that are the endpoint's
   fault (timeout, checksum, permission, other), ``connection_threshold`` (1) if the
   last one could not even connect (the server is down: each further try only costs a
   connect timeout; the half-open probe finds out when it is back), or a stall (transfers in
   flight but no byte moved for ``stall_after`` s, or ``stall_factor`` times the usual
   gap between movements, or twice the time its pending bytes need at its throughput,
   whichever is longest: a dead or hung server, not a busy one), open the circuit
   for a cooldown that doubles on each re-trip up to ``max_cooldown`` (the campaign's
   ``circuit_breaker: {cooldown: 15s, max_cooldown: 5m}``). After the cooldown
   the circuit is half-open: one probe transfer at a time is let through; a success
   closes it, a failure opens it again.
3. **Slow drain.** An endpoint whose measured aggregate throughput is below
   ``slow_ratio`` times the median of its pool (itself included), after
   ``slow_min_completed`` transfers, is drained (no new files) for ``drain_for`` s,
   then re-probed with one transfer and judged again on its fresh throughput.

``down(url, now)`` says whether an endpoint is down rather than busy or slow: its circuit
opened (or its last write failed with NO_SPACE) and no write has succeeded since; the
scheduler uses it for pools that are down as a whole (``pooldown.py``).

The policy keeps its own state per endpoint URL; ``record()`` is called by the
scheduler after every attempt. ``until`` of an exclusion is when it is looked at again
(a probe in flight: a second from now); None only for "no space" by free-space query.
The scheduler journals changes as ``excluded``/``readmitted`` events, and ``campaign
status`` reads them back: ``exclusion_log.py``.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from collections.abc import Sequence

from gridxfer.errors import ErrorClass
from gridxfer.units import fmt_bytes, fmt_duration, fmt_rate
from gridxfer.campaign.policy.selection import (
    EndpointDown,
    EndpointStats,
    Exclusion,
    FileToPlace,
    capacity,
)
from gridxfer.campaign.policy.space import SpaceWatcher, Tokens

REFRESH_HEADROOM = 100      # typical writes: with less room than this, each write brings a reading
# failures that say nothing about the destination endpoint
NOT_ENDPOINT_FAULT = frozenset({ErrorClass.SOURCE_MISSING.value, ErrorClass.EXISTS.value,
                                ErrorClass.CANCELLED.value, ErrorClass.BAD_NAME.value,
                                ErrorClass.AUTH.value,      # the token's fault, not the server's
                                ErrorClass.LOCKED.value})   # that file is busy, not the server


@dataclass
class _State:
    failures: int = 0
    open_until: float | None = None        # circuit open (or half-open once passed)
    half_open: bool = False
    trips: int = 0
    open_reason: str = ""
    nospace_until: float | None = None
    nospace_trips: int = 0
    drained_until: float | None = None
    probe_from: int | None = None          # completed count when a re-probe began
    drain_reason: str = ""
    writes_ok: int = 0                     # successful writes (for the free-space estimate)
    down_since: float | None = None        # first trip (or ENOSPC) with no write since
    down_class: str = ""
    reading: tuple[int, int] = (0, 0)      # (space reading no., writes_ok when first seen)


class DefaultExclusions:
    def __init__(self, *, failure_threshold: int = 3, connection_threshold: int = 1,
                 cooldown: float = 15.0,
                 max_cooldown: float = 300.0, slow_ratio: float = 0.05,
                 slow_min_completed: int = 3, drain_for: float = 60.0,
                 min_free_bytes: int = 2**20, space_cooldown: float = 60.0,
                 space: SpaceWatcher | bool = True, stall_after: float = 10.0,
                 stall_factor: float = 10.0, tokens: Tokens | None = None) -> None:
        self._tokens = tokens           # for the space watcher's queries (space.py)
        self.stall_after, self.stall_factor = stall_after, stall_factor
        self.failure_threshold = failure_threshold
        self.connection_threshold = connection_threshold
        self.cooldown = cooldown
        self.max_cooldown = max_cooldown
        self.slow_ratio = slow_ratio
        self.slow_min_completed = slow_min_completed
        self.drain_for = drain_for
        self.min_free_bytes = min_free_bytes
        self.space_cooldown = space_cooldown
        self._st: dict[str, _State] = {}
        self._space = space if isinstance(space, SpaceWatcher) else None
        self._watch = bool(space)
        self._typical = 0             # largest transfer seen in flight (bytes left at dispatch)

    def _state(self, url: str) -> _State:
        return self._st.setdefault(url, _State())

    def close(self) -> None:
        """Stop the space watcher's threads (the scheduler closes its policies at the end)."""
        if self._space is not None:
            self._space.close()

    # -- the seam ----------------------------------------------------------------
    def record(self, url: str, ok: bool, error_class: str | None, now: float) -> None:
        st = self._state(url)
        if self._space is not None and self._space_is_tight(self._space, url):
            self._space.refresh(url)            # its free space just changed, and it matters
        if ok:
            st.writes_ok += 1
            st.down_since = None
            st.failures = 0
            st.nospace_trips = 0
            if st.open_until is not None and now >= st.open_until:   # probe succeeded
                st.open_until, st.half_open, st.trips = None, False, 0
            return
        cls = str(error_class or ErrorClass.OTHER)     # an ErrorClass is its value (StrEnum)
        if cls in NOT_ENDPOINT_FAULT:
            return
        if cls == ErrorClass.NO_SPACE.value:
            self._went_down(st, cls, now)
            st.nospace_trips += 1
            wait = min(self.max_cooldown, self.space_cooldown * 2 ** (st.nospace_trips - 1))
            st.nospace_until = now + wait
            return
        if st.open_until is not None and now < st.open_until:
            return                          # stragglers from before the trip
        st.failures += 1
        limit = (self.connection_threshold if cls == ErrorClass.CONNECTION.value
                 else self.failure_threshold)
        if st.open_until is not None or st.failures >= limit:
            st.trips += 1
            wait = min(self.max_cooldown, self.cooldown * 2 ** (st.trips - 1))
            was_probe = st.open_until is not None
            self._went_down(st, cls, now)
            st.open_until, st.half_open = now + wait, False
            st.open_reason = (f"circuit open: probe failed ({cls})" if was_probe else
                              f"circuit open: {st.failures} failure{'s' if st.failures > 1 else ''}"
                              f" in a row (last: {cls})")
            st.failures = 0

    def _went_down(self, st: _State, cls: str, now: float) -> None:
        """Called before a trip (or an ENOSPC) is applied: ``since`` stays while it was down."""
        if self._down(st, now) is None:
            st.down_since = now
        st.down_class = cls

    def down(self, url: str, now: float) -> EndpointDown | None:
        """Why ``url`` is down, if it is: its circuit opened (also while half-open: a probe
        is no proof) or its last write failed with NO_SPACE, and no write succeeded since."""
        st = self._st.get(url)
        return None if st is None else self._down(st, now, url)

    @staticmethod
    def _down(st: _State, now: float, url: str = "") -> EndpointDown | None:
        if st.down_since is None:
            return None
        if st.open_until is not None:
            return EndpointDown(url, st.down_since, st.down_class, st.open_reason)
        if st.nospace_until is not None and now < st.nospace_until:
            return EndpointDown(url, st.down_since, ErrorClass.NO_SPACE.value,
                                "no space: last write failed with ENOSPC/quota")
        return None

    def probing(self, url: str) -> bool:
        """Whether ``url`` is eligible only for one probe transfer (a half-open circuit, a
        slow endpoint's re-probe): the scheduler then sends it one file, not a slot's worth."""
        st = self._st.get(url)
        return st is not None and ((st.half_open and st.open_until is not None)
                                   or st.probe_from is not None)

    def eligible(self, candidates: Sequence[str], stats: dict[str, EndpointStats],
                 now: float, file: FileToPlace | None = None
                 ) -> tuple[list[str], list[Exclusion]]:
        ok: list[str] = []
        out: list[Exclusion] = []
        if self._watch:
            if self._space is None:
                self._space = SpaceWatcher(tokens=self._tokens)
            self._space.watch(candidates)
        for es in stats.values():
            if es.pending:
                self._typical = max(self._typical, es.pending_bytes // es.pending)
        for url in candidates:
            why = self._why(url, candidates, stats, now, file)
            if why is None:
                ok.append(url)
            else:
                out.append(why)
        return ok, out

    # -- rules -------------------------------------------------------------------
    def _why(self, url: str, pool: Sequence[str], stats: dict[str, EndpointStats],
             now: float, file: FileToPlace | None) -> Exclusion | None:
        st = self._state(url)
        es = stats.get(url) or EndpointStats(url=url)
        return (self._no_space(url, st, es, now, file) or self._breaker(url, st, es, now)
                or self._slow(url, st, es, pool, stats, now))

    def _space_is_tight(self, space: SpaceWatcher, url: str) -> bool:
        """Whether a write that just ended should bring a new space reading at once: when
        the reading is unknown, or when what is left no longer holds ``REFRESH_HEADROOM``
        more writes of the typical size plus the reserve. Otherwise the periodic reading
        and the estimate (``_no_space`` subtracts the writes since a reading) are enough:
        a small-files campaign ended a write every few hundred microseconds, and each
        forced a query of the server every ``min_interval`` (3 % of its GIL time)."""
        _, free = space.reading(url)
        if free is None:
            return True
        return free < REFRESH_HEADROOM * (max(1, self._typical) + self.min_free_bytes)

    def _no_space(self, url: str, st: _State, es: EndpointStats, now: float,
                  file: FileToPlace | None) -> Exclusion | None:
        if st.nospace_until is not None and now < st.nospace_until:
            return Exclusion(url, "no space: last write failed with ENOSPC/quota",
                             st.nospace_until)
        free = es.free_bytes
        need = max(1, file.size if file else self._typical) + self.min_free_bytes
        if free is None and self._space is not None:
            seq, free = self._space.reading(url)
            if free is not None:
                if st.reading[0] != seq:
                    st.reading = (seq, st.writes_ok)
                # writes finished since that reading are not in it yet
                free -= (st.writes_ok - st.reading[1]) * max(1, self._typical)
        if free is None:
            return None
        room = free - es.pending_bytes
        if room < need:
            return Exclusion(url, f"no space: {fmt_bytes(max(room, 0))} free after pending writes, "
                                  f"{fmt_bytes(need)} needed", None)
        return None

    def _breaker(self, url: str, st: _State, es: EndpointStats, now: float) -> Exclusion | None:
        cap = capacity(es)
        drain = es.pending_bytes / cap if cap > 0 else 0.0   # when its work should be done
        limit = max(self.stall_after, self.stall_factor * es.move_gap, 2 * drain)
        if es.pending > 0 and es.stalled >= limit and (st.open_until is None
                                                       or now >= st.open_until):
            st.trips += 1
            self._went_down(st, ErrorClass.TIMEOUT.value, now)
            st.open_until = now + min(self.max_cooldown, self.cooldown * 2 ** (st.trips - 1))
            st.open_reason = (f"circuit open: stalled, no data moved for "
                              f"{fmt_duration(es.stalled)} with {es.pending} transfers in flight")
            st.failures = 0
        if st.open_until is None:
            return None
        if now < st.open_until:
            return Exclusion(url, f"{st.open_reason}; cooldown {fmt_duration(st.open_until - now)}",
                             st.open_until)
        st.half_open = True
        if es.pending > 0:
            return Exclusion(url, "circuit half-open: probe transfer in flight", now + 1.0)
        return None

    def _slow(self, url: str, st: _State, es: EndpointStats, pool: Sequence[str],
              stats: dict[str, EndpointStats], now: float) -> Exclusion | None:
        if st.drained_until is not None:
            if now < st.drained_until:
                return Exclusion(url, f"{st.drain_reason}; drained", st.drained_until)
            st.drained_until, st.probe_from = None, es.completed
        if st.probe_from is not None:
            if es.completed <= st.probe_from:     # re-probe: one transfer at a time
                return (Exclusion(url, "slow: re-probe transfer in flight", now + 1.0)
                        if es.pending > 0 else None)
            st.probe_from = None                  # fresh sample: judge below
        # judged on measured aggregate throughput only (busy-time based): per-transfer
        # rates of a few early files are dominated by bursts and set-up
        mine = es.throughput
        known = [(stats.get(u) or EndpointStats(url=u)).throughput for u in pool]
        known = [c for c in known if c > 0]
        if mine <= 0 or len(known) < 2 or es.completed < self.slow_min_completed:
            return None
        ref = statistics.median(known)
        if mine >= self.slow_ratio * ref:
            return None
        st.drained_until = now + self.drain_for
        st.drain_reason = (f"slow: {fmt_rate(mine)} < {self.slow_ratio:g} x pool median "
                           f"{fmt_rate(ref)}")
        return Exclusion(url, f"{st.drain_reason}; drained", st.drained_until)
