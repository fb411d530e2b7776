"""XRootD checksum queries that cannot hang on the server's duplicate-job bug.

xrootd (5.5.3 here) computes a checksum that is not stored yet as a job keyed by the
file's path (XrdXrootdJob). A second ``kXR_Qcksum`` for a path whose job is still running
joins that job, but the job remembers its clients by *connection*: if the second request
comes over the same connection as the first, ``XrdXrootdJob2Do::addClient`` finds the link
already registered and adds nothing, the server answers ``kXR_waitresp 600``, and the
result goes only to the first request's stream id. The second query never gets an answer
and ends at its timeout with "[ERROR] Operation expired". XrdCl shares one channel (one
TCP connection) per host:port + login among all threads of a process, so two transfers of
the same fresh source file at once (two tiers, verify=both) hit it at the start of a
campaign: measured with two threads and one channel, the second query expired every
time; with two logins both were answered in 0.14 s.

So every query here:
  * is the only query for its URL in this process (concurrent callers wait for its answer),
  * runs on a channel no other checksum query of this process uses at the same time: slot
    0 is the default channel (shared with stat / mv, which is harmless, and no extra
    connection), slot i > 0 the login ``gxck<i>``; at most ``SLOTS`` per server
    (``GRIDXFER_XRD_CHECKSUM_SLOTS``, 4: the server's default ``xrootd.chksum max``; its
    job table holds 3 x max, past it kXR_wait 30: gfal/digestgate.py has the source),
  * has a bounded timeout (``GRIDXFER_XRD_CHECKSUM_TIMEOUT``, default 300 s).
"""
from __future__ import annotations

import threading
import time

from gridxfer import envsettings
from gridxfer.movers.xrootd.env import client as xrd
from XRootD.client.flags import QueryCode

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import normalise_adler32
from gridxfer.movers.classify import transfer_error
from gridxfer.movers.urls import server_of, with_user
from gridxfer.movers.xrootd.authz import xpath

SLOTS = envsettings.count("GRIDXFER_XRD_CHECKSUM_SLOTS")


def checksum_timeout() -> float:
    return envsettings.value("GRIDXFER_XRD_CHECKSUM_TIMEOUT")


class _ServerSlots:
    """At most SLOTS numbered slots per server; a slot is a login name, so a channel."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.used: set[int] = set()

    def acquire(self, timeout: float) -> int | None:
        with self.cond:
            if not self.cond.wait_for(lambda: len(self.used) < SLOTS, timeout):
                return None
            slot = next(i for i in range(SLOTS) if i not in self.used)
            self.used.add(slot)
            return slot

    def release(self, slot: int) -> None:
        with self.cond:
            self.used.discard(slot)
            self.cond.notify()


class _Flight:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.reply: bytes | None = None
        self.error: TransferError | None = None


_lock = threading.Lock()
_servers: dict[str, _ServerSlots] = {}
_flights: dict[str, _Flight] = {}


def _slots(server: str) -> _ServerSlots:
    with _lock:
        return _servers.setdefault(server, _ServerSlots())


_PROGRAM_FAILED_RETRIES = 2


def _query(url: str, timeout: float) -> bytes:
    pool = _slots(server_of(url))
    slot = pool.acquire(timeout)
    if slot is None:
        raise TransferError(ErrorClass.TIMEOUT,
                            f"{url}: no checksum slot free within {timeout:g} s")
    try:
        server = server_of(url)
        fs = xrd.FileSystem(with_user(server, f"gxck{slot}") if slot else server)
        for attempt in range(1 + _PROGRAM_FAILED_RETRIES):
            status, reply = fs.query(QueryCode.CHECKSUM, xpath(url),
                                     timeout=max(1, int(timeout)))
            # kXR_ServerError 3012 "Program failed": xrootd's checksum job ended without a
            # result (seen under concurrent queries); asking again computes it afresh.
            if status.ok or status.errno != 3012:
                break
            time.sleep(0.5 * (attempt + 1))
    finally:
        pool.release(slot)
    if not status.ok:
        raise transfer_error(status, url)
    return bytes(reply)


def query_checksum(url: str, timeout: float | None = None) -> bytes:
    """The raw ``query checksum`` reply for ``url`` (e.g. b"adler32 0a1b2c3d\\0")."""
    timeout = checksum_timeout() if timeout is None else timeout
    with _lock:
        found = _flights.get(url)
        flight = found if found is not None else _flights.setdefault(url, _Flight())
    leader = found is None
    if not leader:
        if not flight.done.wait(timeout + 5):
            raise TransferError(ErrorClass.TIMEOUT,
                                f"{url}: checksum not answered within {timeout:g} s")
        if flight.error is not None:
            err = flight.error
            raise TransferError(err.error_class, str(err)[len(err.error_class.value) + 2:])
        assert flight.reply is not None
        return flight.reply
    try:
        flight.reply = _query(url, timeout)
        return flight.reply
    except TransferError as exc:
        flight.error = exc
        raise
    except BaseException as exc:
        flight.error = TransferError(ErrorClass.OTHER, f"{url}: checksum failed: {exc}")
        raise
    finally:
        with _lock:
            _flights.pop(url, None)
        flight.done.set()


def adler32(url: str, timeout: float | None = None) -> str:
    """The server's adler32 of ``url``, 8 lowercase hex digits."""
    reply = query_checksum(url, timeout)
    name, _, value = reply.decode(errors="replace").strip("\x00 \n").partition(" ")
    if name.lower() != "adler32" or not value:
        raise TransferError(ErrorClass.OTHER, f"{url}: unexpected checksum reply {reply!r}")
    return normalise_adler32(value.strip())
