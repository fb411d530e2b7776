"""Small-file relays in helper processes, once many are in flight (issue 21).

Why: a campaign moving small files over a long link keeps a hundred or more relays in
flight, and one process then tops out near 700 files/s: every reply of every file goes
through XrdCl's job threads and the GIL, and the thread switches are the process's cost,
not the network's (docs/performance-notes.md, "the event-driven relay, built, measured
and dropped"). The same relays split over two processes moved the same files ~1.4x
faster with less CPU in all. So when more than ``BUSY`` relays are in flight in this
process, the next ones go to ``GRIDXFER_RELAY_PROCS`` helper processes (relayhelper.py;
``0`` keeps every relay here), each running them on threads of its own. One relay or a
few (``gridxfer copy``, a near server, a link with few slots) never starts a helper.

The caller's thread waits for its relay's outcome as it waited for the relay: cancel is
sent on (the helper's relay stops and cleans up, as here), and the outcome is the same
``Upload``, ``TooLarge`` or ``TransferError``. A helper that dies fails its relays in flight
as CONNECTION (retried); later relays go to the helpers left, and once none is left, run
in this process. What a helper learns of a server (its latency: ``pipeline.far``; whether
it honours POSC) comes back with each outcome.
"""
from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import ProgressFn, TransferParams
from gridxfer.movers.xrootd import relaywire as wire
from gridxfer.movers.urls import server_of
from gridxfer import envsettings
from gridxfer.movers.xrootd.pipeline import Latch, far, observe
from gridxfer.movers.xrootd import relaynative
from gridxfer.movers.xrootd.relay import TooLarge
from gridxfer.movers.xrootd.upload import Upload, _posc
from gridxfer.movers.xrootd.watch import stall_timeout

log = logging.getLogger(__name__)
PROCS_VAR = "GRIDXFER_RELAY_PROCS"
BUSY = 16               # relays in flight in this process before helpers take the next

_lock = threading.Lock()
_active = 0
_pool: RelayPool | None = None
_failed = False


def _start(n: int) -> RelayPool | None:
    """The pool, or None (once, with a warning) if its processes cannot be started."""
    global _failed
    try:
        return RelayPool(n)
    except OSError as exc:
        _failed = True
        log.warning("the relay helper processes could not start (%s); small files are "
                    "relayed by this process", exc)
        return None


def procs() -> int:
    """Helper processes to use (``GRIDXFER_RELAY_PROCS``, 0-16; bad values: the default)."""
    return envsettings.count(PROCS_VAR)


def run_relay(src: str, dst: str, params: TransferParams, progress: ProgressFn | None, *,
              read_back: bool, expected: str | None) -> Upload:
    """``relay.relay``, here or in a helper (more than BUSY in flight, a far server). The
    native relay (relaynative.py) is always run here: it needs no GIL while it waits,
    and helpers only added their pipes to it (bench.smallfiles --wan, gx-auto: 1.84 s
    here, 2.12 s with 2 helpers)."""
    global _active, _pool
    if relaynative.available():
        return relaynative.run(src, dst, params, progress, read_back=read_back,
                               expected=expected)
    with _lock:
        _active += 1
        pool = None
        if _active > BUSY and far(server_of(dst)) and procs() > 0 and not _failed:
            pool = _pool = _pool or _start(procs())
            if pool is not None and not pool.alive():
                pool = None
    try:
        if pool is None:
            return relaynative.run(src, dst, params, progress, read_back=read_back,
                                   expected=expected)
        return pool.relay(src, dst, params, progress, read_back=read_back, expected=expected)
    finally:
        with _lock:
            _active -= 1


class _Call:
    __slots__ = ("done", "outcome")

    def __init__(self) -> None:
        self.done = Latch()
        self.outcome: wire.Outcome | None = None


class _Helper:
    """One helper process, its pipe and the relays it has in flight."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gridxfer.movers.xrootd.relayhelper"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.lock = threading.Lock()
        self.calls: dict[int, _Call] = {}
        self.dead = self.closing = False
        threading.Thread(target=self._read, name="relay-helper", daemon=True).start()

    def send(self, req: wire.Request) -> _Call | None:
        call = _Call()
        with self.lock:
            if self.dead:
                return None
            self.calls[req.rid] = call
            try:
                wire.write(self.proc.stdin, req)        # type: ignore[arg-type]
            except (OSError, ValueError):
                self.calls.pop(req.rid, None)
                self.dead = True
                return None
        return call

    def cancel(self, rid: int) -> None:
        with self.lock:
            if not self.dead:
                with contextlib.suppress(OSError, ValueError):
                    wire.write(self.proc.stdin, wire.Cancel(rid))   # type: ignore[arg-type]

    def _read(self) -> None:
        out = self.proc.stdout
        while (msg := wire.read(out)) is not None:      # type: ignore[arg-type]
            if isinstance(msg, wire.Outcome):
                with self.lock:
                    call = self.calls.pop(msg.rid, None)
                if call is not None:
                    call.outcome = msg
                    call.done.set()
        with self.lock:
            self.dead, calls, self.calls = True, self.calls, {}
        code = self.proc.wait()
        for call in calls.values():
            call.done.set()                     # no outcome: CONNECTION, retried
        if not self.closing:
            log.warning("a relay helper process ended (exit %s) with %d copies in flight, "
                        "which are retried; the helpers left, or this process, relay the "
                        "next small files", code, len(calls))


class RelayPool:
    def __init__(self, n: int) -> None:
        env = dict(os.environ)
        here = str(Path(__file__).resolve().parents[3])     # the tree gridxfer runs from
        env["PYTHONPATH"] = os.pathsep.join(
            dict.fromkeys([here, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]))
        self.helpers: list[_Helper] = []
        try:
            for _ in range(n):
                self.helpers.append(_Helper(env))
        except BaseException:
            self.close()
            raise
        self._rid = 0
        self._rid_lock = threading.Lock()

    def alive(self) -> bool:
        return any(not h.dead for h in self.helpers)

    def close(self) -> None:
        """End the helpers: their stdin closes, and they exit (abandoning any copy)."""
        for h in self.helpers:
            h.closing = True
            with contextlib.suppress(OSError, ValueError):
                h.proc.stdin.close()            # type: ignore[union-attr]
        for h in self.helpers:
            try:
                h.proc.wait(5)
            except subprocess.TimeoutExpired:
                h.proc.kill()
                h.proc.wait()

    def relay(self, src: str, dst: str, params: TransferParams, progress: ProgressFn | None,
              *, read_back: bool, expected: str | None) -> Upload:
        if params.cancel is not None and params.cancel.is_set():
            raise TransferError(ErrorClass.CANCELLED, f"{src} -> {dst}: cancelled before start")
        with self._rid_lock:
            self._rid += 1
            rid = self._rid
        live = [h for h in self.helpers if not h.dead]
        helper = min(live, key=lambda h: len(h.calls)) if live else None
        req = wire.Request(rid, src, dst, read_back, expected, params.timeout, params.tokens)
        call = helper.send(req) if helper is not None else None
        if helper is None or call is None:      # no helper left, or it died as we sent
            return relaynative.run(src, dst, params, progress, read_back=read_back,
                                   expected=expected)
        outcome = self._wait(helper, call, rid, params, f"{src} -> {dst}")
        return _result(outcome, src, dst, progress)

    @staticmethod
    def _wait(helper: _Helper, call: _Call, rid: int, params: TransferParams,
              what: str) -> wire.Outcome:
        # the helper's relay times out by itself: source open, read, destination open,
        # write (+ read-back), close, each within min(stall, timeout) + 5 s
        limit = 6 * (max(1.0, min(stall_timeout(), params.timeout)) + 5) + 30
        end, cancelled = time.monotonic() + limit, False
        while not call.done.wait(0.25):
            if not cancelled and params.cancel is not None and params.cancel.is_set():
                helper.cancel(rid)
                cancelled = True
            if time.monotonic() > end:
                raise TransferError(ErrorClass.TIMEOUT, f"{what}: the relay helper gave no "
                                    f"answer in {limit:.0f} s")
        if call.outcome is None:
            raise TransferError(ErrorClass.CONNECTION, f"{what}: the relay helper process "
                                "ended during the copy")
        return call.outcome


def _result(o: wire.Outcome, src: str, dst: str, progress: ProgressFn | None) -> Upload:
    server = server_of(dst)
    if o.latency is not None:
        observe(server, o.latency)
    if o.posc is False:
        _posc[server] = False
    if o.too_large:
        raise TooLarge(src)
    if o.error is not None:
        cls = ErrorClass(o.error[0])
        raise TransferError(cls, o.error[1].removeprefix(f"{cls.value}: "))
    if progress is not None:
        progress(o.bytes, o.bytes)
    return Upload(bytes=o.bytes, adler32=o.adler32, stored_adler32=o.stored_adler32)


def shutdown() -> None:
    """Close this process's helpers, if it started any (tests; exit closes them anyway)."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.close()
