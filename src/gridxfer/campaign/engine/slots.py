"""The transfer slots of each link: how many jobs the dispatcher may hand out, and when a
running transfer gives its slot back.

* At most ``cap`` transfers of a link move data at once (``workers.Gate``).
* Transfers shorter than ``AHEAD`` (typical, once one has ended) are handed out AHEAD:
  up to two per slot (two bundles, below), so a worker never idles on the dispatcher's
  round trip; each waits in the gate, so running <= cap still holds. Measured on small
  files over 20 ms (2,000 x 4 KB, 32 slots, adler32: ~65 ms a file): 4.27-4.28 s
  against 4.32-4.37 s when only transfers under ``QUICK`` were handed out ahead; 2.13 s
  against 2.19-2.22 s with the optimizer choosing (docs/performance-notes.md).
* Short transfers (typical < ``QUICK``: small files on a near link) go to workers in
  BUNDLES of about ``BUNDLE_SECONDS`` of work (one queue hand-off each way per bundle, not
  per file; one endpoint per bundle). A worker runs its bundle one file at a time, each
  through the gate.
* Long transfers (typical >= ``RELEASE_AFTER``, or this one moved data for that long) leave
  the gate when their bytes are in place (``TransferParams.on_data_done``): the next copy
  starts while the server checksums the last one. Each such verification holds a worker
  thread, so the link gets spare workers, started (and their sessions opened) as soon as
  the link's first transfers turn out long, before the first of them ends.
* Short transfers on a far link (typical > ``QUICK``: small files over a WAN) leave it too,
  when the mover says only the close is left: XRootD's small-file relay once the bytes
  read back matched (relay.cpp's ``verified``). Its close, which makes the verified file
  visible, then crosses the link while the next copy's open does (issue 21: with adler32
  a file is 3 flights, open; write + read-back; close: a slot pays 2). At most ``cap``
  transfers move data; the destination sees up to ``cap`` more closes in flight. On a
  near link the slot is kept: no lock a file there, and a close costs microseconds.

"Typical" is an EWMA of the seconds per transfer, fed by the dispatcher.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable
from typing import TypeVar

from gridxfer.campaign.engine.jobs import Job
from gridxfer.campaign.accounting.stats import StatsSnapshot
from gridxfer.campaign.engine.workers import Gate

AHEAD = 0.5                  # s: links whose transfers take less get jobs dispatched ahead
QUICK = 0.05                 # s: links whose transfers take less get them in bundles
RELEASE_AFTER = 0.5          # s: links whose transfers take longer free the slot at data_done
BUNDLE_SECONDS = 0.03        # s: short transfers go to a worker in bundles of about this much work
MAX_BUNDLE = 16
R = TypeVar("R")


class LinkSlots:
    def __init__(self, tiers: Iterable[str]) -> None:
        tiers = list(tiers)
        self._gates = {t: Gate() for t in tiers}
        self._typical = {t: QUICK for t in tiers}
        self._verifying = {t: 0 for t in tiers}     # released at data_done, still checking
        self._lock = threading.Lock()
        self._spare: set[str] = set()               # links already given spare workers
        self._first: dict[str, float] = {}          # monotonic time of the link's first copy
        self._ended: set[str] = set()               # links where a transfer has finished

    # ---------------------------------------------------------------- dispatcher side
    def set_cap(self, tier: str, cap: int) -> None:
        self._gates[tier].set_limit(cap)

    def finished(self, tier: str, seconds: float) -> None:
        self._typical[tier] = 0.8 * self._typical[tier] + 0.2 * seconds
        self._ended.add(tier)

    def bundle(self, tier: str) -> int:
        """How many jobs of the link one worker gets at a time (1 unless transfers are short)."""
        typical = self._typical[tier]
        if typical >= QUICK:
            return 1
        return max(1, min(MAX_BUNDLE, int(BUNDLE_SECONDS / max(typical, 1e-4))))

    def bundles(self, jobs: list[Job]) -> list[list[Job]]:
        """``jobs`` cut into bundles per link and endpoint (a slow endpoint holds up only
        its own bundle), each the size the link's transfer times allow."""
        groups: dict[tuple[str, str], list[Job]] = {}
        for job in jobs:
            groups.setdefault((job.tier, job.endpoint), []).append(job)
        out: list[list[Job]] = []
        for (tier, _), group in groups.items():
            size = self.bundle(tier)
            out.extend(group[i:i + size] for i in range(0, len(group), size))
        return out

    def free(self, tier: str, cap: int, active: int) -> int:
        """Jobs the dispatcher may hand out now (0 while a look-ahead refill would be
        smaller than half a cap, or than a bundle: refills go in batches)."""
        # nothing handed out ahead before a transfer of the link has ended: the first
        # ones may be long, and their destinations would be chosen blind
        ahead = tier in self._ended and self._typical[tier] < AHEAD
        size = self.bundle(tier)
        limit = 2 * cap * size if ahead else cap
        free = limit - (active - self._verifying[tier])
        least = max(cap // 2, size) if ahead else 1
        return 0 if free < least else free

    def wants_spare_workers(self, tier: str) -> bool:
        """True once per link: when its first copies have moved data for RELEASE_AFTER
        without any transfer ending (they will verify beside the next copies: the spare
        workers get ready meanwhile), or at the latest when a verification runs."""
        if tier in self._spare:
            return False
        first = self._first.get(tier)
        long_first = (first is not None and tier not in self._ended
                      and time.monotonic() - first >= RELEASE_AFTER)
        if self._verifying[tier] or long_first:
            self._spare.add(tier)
            return True
        return False

    def running(self, tier: str) -> int:
        """Transfers of the link holding a worker: moving data or verifying."""
        return self._gates[tier].running + self._verifying[tier]

    def annotate(self, snap: StatsSnapshot) -> StatsSnapshot:
        """``snap`` with each link's jobs handed out ahead (waiting for a slot) counted apart,
        so a live view shows running <= cap plus the jobs queued behind them."""
        links = tuple(dataclasses.replace(link, ahead=max(0, link.active - self.running(link.tier)))
                      for link in snap.links)
        return dataclasses.replace(snap, links=links)

    # ---------------------------------------------------------------- worker side
    def run(self, job: Job, work: Callable[[Callable[[], None]], R],
            wake: Callable[[], None]) -> R | None:
        """Wait for a slot of the job's link (None if ``job.cancel`` comes first), then
        ``work(data_done)``; the slot is given back when ``work`` returns."""
        tier = job.tier
        gate = self._gates[tier]
        if job.cancel.is_set() or not gate.enter(job.cancel):
            return None             # cancelled while it waited (a stop, or requeued)
        with self._lock:
            job.slot = "gate"
        entered = time.monotonic()
        self._first.setdefault(tier, entered)

        def long() -> bool:
            return (self._typical[tier] >= RELEASE_AFTER
                    or time.monotonic() - entered >= RELEASE_AFTER)

        def data_done() -> None:
            is_long = long()
            if not is_long and self._typical[tier] <= QUICK:
                return                  # a near link's short transfers keep their slot: no
                                        # lock on the loopback small-file path
            with self._lock:
                if job.slot != "gate":
                    return
                job.slot = "verifying"
                self._verifying[tier] += 1
            gate.leave()
            if is_long:                 # short ones have the next job waiting in the gate
                wake()                  # the dispatcher may start the next copy

        try:
            return work(data_done)
        finally:
            self.give_back(job)

    def give_back(self, job: Job) -> None:
        """Free what ``job`` holds: its gate slot or its place among the verifications.
        Idempotent: the watchdog gives back for a transfer it abandons, and the worker
        again if that transfer ever returns."""
        with self._lock:
            held, job.slot = job.slot, None
            if held == "verifying":
                self._verifying[job.tier] -= 1
        if held == "gate":
            self._gates[job.tier].leave()
