"""The scheduler's worker threads: each runs one job at a time and puts its result on a
queue the dispatcher drains. A worker stuck in an abandoned job is written off and
replaced; written-off workers are not waited for at the end."""
from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterable
from typing import Callable

from .jobs import Job, Result


class WorkerPool:
    def __init__(self, work: Callable[[Job], Result]) -> None:
        self._work = work
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._results: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lost: set[threading.Thread] = set()     # stuck in an abandoned transfer

    def start(self, n: int = 1) -> None:
        for _ in range(n):
            th = threading.Thread(target=self._run, name=f"gridxfer-worker-{len(self._threads)}",
                                  daemon=True)
            th.start()
            self._threads.append(th)

    def submit(self, job: Job) -> None:
        self._jobs.put(job)

    def collect(self, block: float) -> list[Result]:
        """Every result there is, waiting up to ``block`` seconds for the first."""
        results: list[Result] = []
        try:
            if block > 0:
                results.append(self._results.get(timeout=block))
            while True:
                results.append(self._results.get_nowait())
        except queue.Empty:
            pass
        return results

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

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            job.thread = threading.current_thread()
            self._results.put(self._work(job))
