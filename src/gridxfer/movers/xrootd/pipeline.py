"""Requests in flight together on one XrdCl file: the end of a small upload in one round trip.

XRootD answers the requests of a connection in order, so a client need not wait for one
reply before sending a request that does not depend on it. XrdCl's asynchronous calls
(``callback=``) send at once; ``finish`` uses them to end an upload of one buffer:

* without verification: ``write`` and ``close`` back to back, one round trip. XrdCl
  refuses a close while requests are in flight ("Invalid operation") unless the file's
  ``BundledClose`` property is set (``bundled_close``, before the open);
* with verification: ``write`` and a read-back ``read`` back to back, then ``close`` once
  the bytes the server returns have the adler32 of those sent: two round trips, and a
  mismatch leaves the POSC file unclosed (the caller removes it). A server that ran the
  read before the write ended (asynchronous I/O) is asked again after the write's reply;
  only that answer can fail the copy.

Why a close sent before the write's reply persists no partial file (issue 21): xrootd's
ofs answers a failed write on a POSC file by unpersisting it (``XrdOfs::Emsg`` ->
``Unpersist``, 5.5.3 and master: the file is unlinked) before it reads the connection's
next request, so the close that follows has nothing to keep; checked on a real xrootd
with a full destination (tests/integration/test_xrootd_failed_write_posc.py). The close
cannot carry the size written instead: ``kXR_close`` has no size field (XProtocol.hh:
``reserved[12]``) and ``do_Close`` checks none. Not covered: an oss that answers a write
with EBUSY or ETIMEDOUT (``kXR_wait``, no unpersist; proxies, network file systems):
the close in flight then commits what was written before the retried write fails, and
the file is visible until the ``rm`` that follows (docs/performance-notes.md).

Only where round trips cost: a reply to an asynchronous request reaches Python through
a callback on an XrdCl thread, which must take the GIL, and then the waiting worker must
take it again; on loopback, with workers busy in Python, that costs more than the round
trip it saves (bench.smallfiles, 5,000 x 4 KB: 1.8-1.9 s -> 2.4-3.4 s). So each
server's fastest recent open is remembered (``observe``), and a server answering within
``NEAR`` (5 ms, ``GRIDXFER_XRD_NEAR_MS``) gets the plain synchronous calls (``far`` is
False); an unknown server is far.

Used by relay.py (root -> root) and upload.py (file -> root) for files of one write.
"""
from __future__ import annotations

import contextlib
import ctypes
import threading
import time
from typing import Any

from gridxfer import envsettings
from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.adler import adler32
from gridxfer.movers.base import TransferParams, normalise_adler32
from gridxfer.movers.classify import transfer_error


NEAR_VAR = "GRIDXFER_XRD_NEAR_MS"


def _near() -> float:
    """Seconds: an open answered faster is a server too near to pipeline (and to hand to
    the relay helpers); ``GRIDXFER_XRD_NEAR_MS`` (0: every server is far), default 5 ms."""
    return envsettings.value(NEAR_VAR) / 1000


NEAR = _near()
_latency: dict[str, float] = {}   # server -> its fastest recent open (s)


def observe(server: str, seconds: float) -> None:
    """Record how long an open on ``server`` took. The fastest recent one counts (a
    minimum that rises 2 % per open): a busy process measures the GIL along with the
    round trip (loopback opens of 5-20 ms under load), never less than the round trip."""
    old = _latency.get(server)
    _latency[server] = seconds if old is None else min(seconds, old * 1.02)


def far(server: str) -> bool:
    """Is ``server`` far enough for requests in flight together to pay (unknown: yes)?"""
    return _latency.get(server, NEAR) >= NEAR


class Latch:
    """``threading.Event``'s ``set`` and ``wait`` for one setter: a lock held until set.
    An Event is a Condition in Python (a waiter lock, a deque, its own lock taken again on
    waking); a reply is waited for once or twice per request, hundreds a second."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()

    def set(self) -> None:
        with contextlib.suppress(RuntimeError):     # set twice: already open
            self._lock.release()

    def wait(self, timeout: float) -> bool:
        if not self._lock.acquire(timeout=timeout):
            return False
        with contextlib.suppress(RuntimeError):
            self._lock.release()
        return True


class Reply:
    """The answer to one asynchronous XrdCl request."""

    def __init__(self) -> None:
        self.done = Latch()
        self.status: Any = None
        self.response: Any = None

        self.sent = time.monotonic()
        self.seconds = 0.0              # from the request to its reply

    def __call__(self, status: Any, response: Any, _hosts: Any) -> None:
        self.status, self.response = status, response
        self.seconds = time.monotonic() - self.sent
        self.done.set()

    def wait(self, timeout: float, params: TransferParams, what: str) -> Any:
        """The reply's status; TIMEOUT after ``timeout`` s, CANCELLED on cancel."""
        end = time.monotonic() + timeout
        while not self.done.wait(0.25):
            if params.cancel is not None and params.cancel.is_set():
                raise TransferError(ErrorClass.CANCELLED, f"{what}: cancelled")
            if time.monotonic() > end:
                raise TransferError(ErrorClass.TIMEOUT, f"{what}: no reply in {timeout:.0f} s")
        return self.status


SU_ALREADY_DONE = 4     # XrdClStatus.hh suAlreadyDone


def send(call: Any, *args: Any, **kw: Any) -> Reply:
    """Start an asynchronous request; a refusal to queue it is answered at once, and so is
    a close of a file XrdCl holds as closed (FileStateHandler::Close returns OK with
    ``suAlreadyDone`` and never calls the callback; relay.cpp's ``send`` does the same)."""
    reply = Reply()
    status = call(*args, callback=reply, **kw)
    if status is not None and (not status.ok or status.code == SU_ALREADY_DONE):
        reply(status, None, None)
    return reply


def bundled_close(handle: Any) -> None:
    """Let ``handle`` send ``close`` while requests are in flight (XrdCl's
    FileStateHandler::Close checks the ``BundledClose`` property). The 5.5.3 binding returns
    ``True`` without a reference of its own (CPython aborts with "deallocating True" after
    enough calls): one is given back for each call (an extra reference to ``True`` or
    ``False`` is harmless where the binding is fixed)."""
    answer = handle.set_property("BundledClose", "true")
    if isinstance(answer, bool):
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(answer))


def finish(handle: Any, data: bytes, sent_adler: str, *, read_back: bool,
           params: TransferParams, wait: float, what: str, pipelined: bool = True) -> str | None:
    """Write ``data`` at offset 0 of the open ``handle`` (opened after ``bundled_close``)
    and close it; with ``read_back`` only after the bytes read back match ``sent_adler``,
    whose value is returned (None without ``read_back``). Raises on any failure; the
    caller then removes the file (the close may or may not have been sent).
    ``pipelined`` False: the same requests one at a time (a near server, ``far``)."""
    tmo = max(1, int(wait))
    n = len(data)
    if not pipelined:
        return _one_by_one(handle, data, sent_adler, read_back=read_back, tmo=tmo, what=what)
    wrote = send(handle.write, data, 0, n, timeout=tmo) if n else None
    if not read_back:
        closing = send(handle.close, timeout=tmo)
        if wrote is not None and not wrote.wait(wait + 5, params, what).ok:
            raise transfer_error(wrote.status, what, side="destination")
        if not closing.wait(wait + 5, params, what).ok:
            raise transfer_error(closing.status, what, side="destination")
        return None
    back = send(handle.read, 0, n + 1, timeout=tmo)
    if wrote is not None and not wrote.wait(wait + 5, params, what).ok:
        raise transfer_error(wrote.status, what, side="destination")
    stored = _stored(back, n, params, wait, what)
    if stored != sent_adler:                # read before the write ended? ask again
        stored = _stored(send(handle.read, 0, n + 1, timeout=tmo), n, params, wait, what)
    if stored is None:
        raise TransferError(ErrorClass.CHECKSUM, f"{what}: the server holds a different "
                            f"number of bytes than the {n} sent")
    if stored != sent_adler:
        raise TransferError(ErrorClass.CHECKSUM, f"{what}: adler32 {stored} read back != "
                            f"source {sent_adler}")
    params.data_done()          # verified: only the close is left (relay.cpp's ``verified``)
    status, _ = handle.close(timeout=tmo)
    if not status.ok:
        raise transfer_error(status, what, side="destination")
    return stored


def _one_by_one(handle: Any, data: bytes, sent_adler: str, *, read_back: bool, tmo: int,
                what: str) -> str | None:
    n = len(data)
    if n:
        status, _ = handle.write(data, 0, n, timeout=tmo)
        if not status.ok:
            raise transfer_error(status, what, side="destination")
    stored = None
    if read_back:
        status, back = handle.read(0, n + 1, timeout=tmo)
        if not status.ok:
            raise transfer_error(status, what, side="destination")
        back = back or b""
        if len(back) != n:
            raise TransferError(ErrorClass.CHECKSUM, f"{what}: the server holds {len(back)} "
                                f"bytes, {n} were sent")
        stored = normalise_adler32(adler32(back))
        if stored != sent_adler:
            raise TransferError(ErrorClass.CHECKSUM, f"{what}: adler32 {stored} read back != "
                                f"source {sent_adler}")
    status, _ = handle.close(timeout=tmo)
    if not status.ok:
        raise transfer_error(status, what, side="destination")
    return stored


def _stored(reply: Reply, n: int, params: TransferParams, wait: float,
            what: str) -> str | None:
    """adler32 of what a read-back returned; None if it is not ``n`` bytes long."""
    status = reply.wait(wait + 5, params, what)
    if not status.ok:
        raise transfer_error(status, what, side="destination")
    data = reply.response or b""
    return normalise_adler32(adler32(data)) if len(data) == n else None
