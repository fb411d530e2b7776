"""The scheduler's worker threads: each runs one job at a time and puts its result on a
queue the dispatcher drains. A worker stuck in an abandoned job is written off and
replaced; written-off workers are not waited for at the end. ``Gate``: at most N jobs
of a link run at once, so jobs dispatched ahead of time wait for a free slot."""
from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Iterable
from collections.abc import Callable

from gridxfer.movers.base import CancelFlag
from gridxfer.campaign.engine.jobs import Job, Result


class WorkerPool:
    def __init__(self, work: Callable[[Job], Result],
                 work_many: Callable[[list[Job]], list[Result]] | None = None) -> None:
        self._work = work
        self._work_many = work_many     # a bundle in one call, where it can (bundles.py)
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._results: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lost: set[threading.Thread] = set()     # stuck in an abandoned transfer

    def start(self, n: int = 1, init: Callable[[], None] | None = None) -> None:
        """``n`` more workers; each runs ``init`` (e.g. opening sessions) before its first job."""
        for _ in range(n):
            th = threading.Thread(target=self._run, args=(init,),
                                  name=f"gridxfer-worker-{len(self._threads)}", daemon=True)
            th.start()
            self._threads.append(th)

    def submit_bundle(self, jobs: list[Job]) -> None:
        """Jobs one worker runs one after the other, handing back their results together
        (short transfers: one queue hand-off each way per bundle, not per file)."""
        for job in jobs:
            job.bundle = jobs
        self._jobs.put(jobs)

    def wake(self) -> None:
        """Wake the dispatcher waiting in ``collect`` (a link slot came free)."""
        self._results.put(None)

    def collect(self, block: float) -> list[Result]:
        """Every result there is, waiting up to ``block`` seconds for the first (or a wake).
        The queue holds one list of results per bundle, or None for a wake."""
        results: list[list[Result] | None] = []
        try:
            if block > 0:
                results.append(self._results.get(timeout=block))
            while True:
                results.append(self._results.get_nowait())
        except queue.Empty:
            pass
        return [r for bundle in results if bundle is not None for r in bundle]

    def write_off(self, jobs: Iterable[Job]) -> None:
        """The workers running ``jobs`` may never come back: do not wait for them."""
        self._lost.update(j.thread for j in jobs if j.thread)

    def close(self) -> None:
        """Ask every worker to exit after its current job."""
        for _ in self._threads:
            self._jobs.put(None)

    def join(self, timeout: float) -> None:
        """Wait (``timeout`` seconds in all) for the workers that were not written off."""
        deadline = time.monotonic() + timeout
        for th in self._threads:
            if th not in self._lost:
                th.join(max(0.0, deadline - time.monotonic()))

    def _run(self, init: Callable[[], None] | None = None) -> None:
        if init is not None:
            with contextlib.suppress(Exception):    # a warm-up is only an optimisation
                init()
        while True:
            bundle = self._jobs.get()
            if bundle is None:
                return
            for job in bundle:
                job.thread = threading.current_thread()
            if self._work_many is not None and len(bundle) > 1:
                self._results.put(self._work_many(bundle))
            else:
                self._results.put([self._work(job) for job in bundle])


class Gate:
    """At most ``limit`` transfers of one link move data at once. The dispatcher may hand
    out jobs ahead of time (short transfers: the next job is already waiting when one ends,
    without a round trip through the dispatcher); they wait here for a free slot. A
    transfer leaves the gate when its bytes are in place (``TransferParams.data_done``):
    its verification (server checksum, rename) no longer holds the link."""

    def __init__(self, limit: int = 0) -> None:
        self._cond = threading.Condition()
        self._limit, self._running = limit, 0

    def set_limit(self, limit: int) -> None:
        with self._cond:
            if limit != self._limit:
                self._limit = limit
                self._cond.notify_all()

    def enter(self, cancel: threading.Event | CancelFlag) -> bool:
        """Wait for a slot; False if ``cancel`` is set first."""
        with self._cond:
            while self._running >= self._limit:
                if cancel.is_set():
                    return False
                self._cond.wait(0.1)
            self._running += 1
            return True

    def leave(self) -> None:
        with self._cond:
            self._running -= 1
            self._cond.notify()

    @property
    def running(self) -> int:
        return self._running
