"""Run an XrdCl ``CopyProcess`` under a watchdog, so a stalled copy cannot last long.

XrdCl polls the progress handler's ``should_cancel`` only between chunks: while a read or
write is outstanding (measured: source server stopped with SIGSTOP mid-copy) it polls
nothing and waits for XrdCl's own request timeout (``RequestTimeout``, default 1800 s).
So ``CopyProcess.run`` runs in a helper thread and the caller's thread watches it:
  * no new byte for ``GRIDXFER_XRD_STALL_TIMEOUT`` seconds (default 120; the open phase
    counts too), the transfer deadline, or the cancel event -> ``should_cancel`` answers
    True from then on;
  * if ``run`` still has not returned ``ABANDON_GRACE`` seconds later, the copy is
    abandoned (its thread ends when XrdCl's own timeouts fire; the cancelled job's POSC
    file is discarded by the server) and a TransferError TIMEOUT / CANCELLED is raised,
    so the scheduler retries instead of waiting for the campaign timeout.
"""
from __future__ import annotations

import threading
import time
from typing import Any

from XRootD.client.utils import CopyProgressHandler

from gridxfer import envsettings
from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import Cancel, ProgressFn

ABANDON_GRACE = 10.0
POLL = 0.5


def stall_timeout() -> float:
    return envsettings.value("GRIDXFER_XRD_STALL_TIMEOUT")


class WatchedHandler(CopyProgressHandler):
    def __init__(self, progress: ProgressFn | None, cancel: Cancel | None,
                 deadline: float, stall: float) -> None:
        super().__init__()
        self.progress, self.cancel, self.deadline, self.stall = progress, cancel, deadline, stall
        self.reason: ErrorClass | None = None
        self.detail = ""
        self.abandoned = False
        self.processed = 0
        self.last_move = time.monotonic()

    def update(self, jobId, processed, total):  # noqa: N803 - XRootD callback names
        if int(processed) > self.processed:
            self.processed = int(processed)
            self.last_move = time.monotonic()
        if self.progress:
            self.progress(int(processed), int(total) if total else None)

    def check(self) -> ErrorClass | None:
        """Decide (once) whether the copy must stop; the watcher and XrdCl both ask."""
        if self.reason is None:
            why = stop_reason(self.cancel, self.deadline, self.last_move, self.stall,
                              self.processed)
            if why is not None:
                self.reason, self.detail = why
        return self.reason

    def should_cancel(self, jobId):  # noqa: N803
        return self.check() is not None


def stop_reason(cancel: Cancel | None, deadline: float, last_move: float,
                stall: float, moved: int) -> tuple[ErrorClass, str] | None:
    """Why a transfer must stop now, if it must: cancelled, past its deadline, or no byte
    moved for ``stall`` seconds since ``last_move`` (``moved`` bytes so far)."""
    now = time.monotonic()
    if cancel is not None and cancel.is_set():
        return ErrorClass.CANCELLED, "cancelled"
    if now > deadline:
        return ErrorClass.TIMEOUT, "transfer timeout reached"
    if now - last_move > stall:
        return ErrorClass.TIMEOUT, f"no progress for {stall:g} s (stalled at {moved} bytes)"
    return None


def run_watched(job: Any, handler: WatchedHandler, what: str) -> tuple[Any, Any]:
    """``job.run(handler)`` under the watchdog: (status, results), or TransferError."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["result"] = job.run(handler)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name="xrdcl-copy", daemon=True).start()
    stopped_at: float | None = None
    while not done.wait(POLL):
        reason = handler.check()
        if reason is None:
            continue
        stopped_at = stopped_at or time.monotonic()
        if time.monotonic() - stopped_at > ABANDON_GRACE:
            handler.abandoned = True
            raise TransferError(reason, f"{what}: {handler.detail}; XrdCl copy abandoned")
    if "error" in box:
        raise box["error"]
    if handler.reason is not None:
        raise TransferError(handler.reason, f"{what}: {handler.detail}")
    return box["result"]
