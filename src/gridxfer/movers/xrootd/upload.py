"""Direct XRootD upload (file -> root://): the final name, opened with POSC.

The integrity contract (base.py) allows "a temporary name or XRootD POSC". The temporary
name costs three extra server round trips per file (exists stat, size stat of the temp,
rename) plus a second local pass for the adler32; for small files that was 5 round trips
against xrdcp's one open/write/close (bench.smallfiles: 0.18-0.27x xrdcp). This path:

* opens the FINAL name with ``kXR_new | kXR_posc | kXR_mkpath``: an existing file fails
  the open (EXISTS, nothing touched), missing directories are made, and the server keeps
  the file only if ``close`` succeeds (persist on successful close). If this process dies
  mid-copy the file stays "POSC pending" (``StatInfoFlags.POSC_PENDING``) and only its
  creator may open it; the server deletes it 10 minutes later (``ofs.persist hold``), and
  crash recovery deletes it at once (``Entry.pending``);
* reads the local file once, computing adler32 on the bytes it sends, and keeps up to
  ``WINDOW`` writes of ``CHUNK`` bytes in flight (a synchronous write per chunk would
  idle the link one RTT per chunk);
* after ``close``: the size is the byte count the server acknowledged; with verify
  destination/both the server's adler32 is compared with the one computed while sending
  (and the catalogue's). Any failure after the open removes the final name.
* a file of one write request (at most ``CHUNK``) ends in one flight: write and close
  back to back, or write and the read-back below, then close (pipeline.py);
* files of at most ``READ_BACK_MAX`` bytes are verified by reading them back through the
  still-open handle (one ``kXR_read``, answered from the server's file) instead of a checksum
  query: the same end-to-end check (the server returns what it stored), one round trip,
  and none of xrootd's checksum jobs, which a server runs ``xrootd.chksum max`` at a time and
  past that answers ``kXR_wait 30`` (``xrdcp --parallel 8 --cksum`` stalls 30-60 s in most
  ``bench.smallfiles`` rounds: BENCHMARKS.md "Fifth pass"). Single-thread cost on loopback:
  +0.31 ms per 4 KB file against +0.37 ms for the query; unlike queries, read-backs need
  no per-server limit.

Used by ``XRootDMover.copy`` for file -> root without TPC when overwrite is off (a
replace keeps the old file until the new one is verified: temp + rename). Some servers
ignore kXR_posc (EOS FSTs run ``ofs.persist off``: a dead writer's partial file then looks
complete): the first upload to each server checks that its open file is POSC-pending
(one stat), and servers that ignore POSC get temp + rename from then on
(``posc_honoured``).
"""
from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from dataclasses import dataclass
from collections.abc import Callable

from gridxfer.movers.xrootd.env import client as xrd
from XRootD.client.flags import OpenFlags, StatInfoFlags

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.adler import adler32
from gridxfer.movers.base import ProgressFn, TransferParams, normalise_adler32
from gridxfer.movers.classify import transfer_error
from gridxfer.movers.urls import server_of, with_user
from gridxfer.movers.xrootd.authz import xpath, xurl
from gridxfer.movers.xrootd.pipeline import bundled_close, far, finish, observe
from gridxfer.movers.xrootd.watch import stall_timeout, stop_reason

_posc: dict[str, bool] = {}     # server -> does it keep an open file POSC-pending?
_posc_lock = threading.Lock()

CHUNK = 4 << 20                 # bytes per write request
WINDOW = 4                      # writes in flight: 16 MiB, above 1 Gbit/s x 100 ms
READ_BACK_MAX = 64 << 10        # bytes: above this the server's checksum (no data sent twice)
CLEANUP_TIMEOUT = 10
FLAGS = OpenFlags.NEW | OpenFlags.POSC | OpenFlags.MAKEPATH


@dataclass(frozen=True)
class Upload:
    bytes: int
    adler32: str                # of the bytes sent (8 lowercase hex digits)
    stored_adler32: str | None = None   # of the bytes read back from the server, if it was


class _Window:
    """Writes in flight: at most WINDOW, the first error kept, progress counted."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.pending: dict[int, bytes] = {}      # offset -> buffer XrdCl still reads
        self.error = None
        self.acked = 0
        self.last_ack = time.monotonic()

    def callback(self, offset: int):
        def done(status, _response, _hosts) -> None:
            with self.cond:
                data = self.pending.pop(offset, b"")
                if status.ok:
                    self.acked += len(data)
                    self.last_ack = time.monotonic()
                elif self.error is None:
                    self.error = status
                self.cond.notify_all()
        return done


def _drain(win: _Window, limit: int, params: TransferParams, deadline: float, stall: float,
           what: str) -> None:
    """Wait until at most ``limit`` writes are in flight; raise on error/stall/cancel."""
    with win.cond:
        while True:
            if win.error is not None:
                raise transfer_error(win.error, what, side="destination")
            if len(win.pending) <= limit:
                return
            why = stop_reason(params.cancel, deadline, win.last_ack, stall, win.acked)
            if why is not None:
                raise TransferError(why[0], f"{what}: {why[1]}")
            win.cond.wait(0.25)


def _send(handle: xrd.File, fd: int, size: int, params: TransferParams,
          progress: ProgressFn | None, deadline: float, stall: float, what: str) -> Upload:
    if size <= CHUNK:           # one request: no window, no callback
        # not CHUNK + 1: a 4 MiB buffer per small file costs mmap/munmap
        data = os.read(fd, size + 1)
        if data:
            status, _ = handle.write(data, 0, len(data), timeout=int(stall))
            if not status.ok:
                raise transfer_error(status, what, side="destination")
        if len(data) != size:
            raise TransferError(ErrorClass.CHECKSUM, f"{what}: read {len(data)} bytes of "
                                f"{size} (source changed during the copy)")
        if progress is not None:
            progress(size, size)
        return Upload(bytes=size, adler32=normalise_adler32(adler32(data)))
    win = _Window()
    value, offset = 1, 0
    while data := os.read(fd, CHUNK):
        if params.cancel is not None and params.cancel.is_set():
            raise TransferError(ErrorClass.CANCELLED, f"{what}: cancelled")
        value = adler32(data, value)
        _drain(win, WINDOW - 1, params, deadline, stall, what)
        with win.cond:
            win.pending[offset] = data
        status = handle.write(data, offset, len(data), timeout=int(stall),
                              callback=win.callback(offset))
        if not status.ok:
            with win.cond:
                win.pending.pop(offset, None)
            raise transfer_error(status, what, side="destination")
        offset += len(data)
        if progress is not None:
            progress(win.acked, size)
    _drain(win, 0, params, deadline, stall, what)
    if params.cancel is not None and params.cancel.is_set():
        raise TransferError(ErrorClass.CANCELLED, f"{what}: cancelled")
    if offset != size:      # the size check: what the source had vs what was sent
        raise TransferError(ErrorClass.CHECKSUM,
                            f"{what}: read {offset} bytes of {size} "
                            "(source changed during the copy)")
    if progress is not None:
        progress(win.acked, size)
    return Upload(bytes=win.acked, adler32=normalise_adler32(value))


def posc_upload(path: str, dst: str, params: TransferParams, progress: ProgressFn | None,
                *, own_channel: Callable[[], tuple[str, Callable[[], None]]] | None = None,
                read_back: bool = False) -> Upload:
    """Upload local ``path`` to the new file ``dst``; on failure nothing is left at ``dst``.

    ``own_channel() -> (login, release)``: called for a file of more than one request; the
    upload then runs on the XRootD channel of that login name (its own TCP connection), and
    ``release()`` runs when it ends. Small files share the default channel.
    ``read_back``: a file of at most READ_BACK_MAX bytes is read back before the close and
    ``stored_adler32`` set (a different length is a CHECKSUM error, nothing is kept).

    The source is read through a plain descriptor (open, fstat, read, close): every system
    call a Python thread makes hands the GIL over, and with 8 uploads of 4 KB in flight the
    buffered ``open()``'s extra calls (ioctl, lseek, a read to find EOF) and a separate
    ``stat`` cost more than the XRootD requests themselves."""
    what = f"file://{path} -> {dst}"
    if params.cancel is not None and params.cancel.is_set():
        raise TransferError(ErrorClass.CANCELLED, f"{what}: cancelled before start")
    stall = stall_timeout()
    deadline = time.monotonic() + params.timeout
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise transfer_error(exc, f"file://{path}") from None
    release = None
    try:
        try:
            st = os.fstat(fd)
        except OSError as exc:
            raise transfer_error(exc, f"file://{path}") from None
        if stat.S_ISDIR(st.st_mode):
            raise TransferError(ErrorClass.OTHER, f"file://{path}: source is a directory")
        size = st.st_size
        target = dst
        if size > CHUNK and own_channel is not None:
            login, release = own_channel()
            target = with_user(dst, login)
        handle = xrd.File()
        pipelined = size <= CHUNK and far(server_of(dst))
        if pipelined:               # one write: write and close (or read-back) in one flight
            bundled_close(handle)
        opened_at = time.monotonic()
        status, _ = handle.open(xurl(target), FLAGS,
                                timeout=max(1, int(min(stall, params.timeout))))
        if not status.ok:
            raise transfer_error(status, what, side="destination")
        observe(server_of(dst), time.monotonic() - opened_at)
        closed = False
        try:
            _probe_posc(dst)
            if size <= CHUNK:
                return _one_flight(handle, fd, size, params, progress, stall, what,
                                   pipelined=pipelined,
                                   read_back=read_back and size <= READ_BACK_MAX)
            try:
                sent = _send(handle, fd, size, params, progress, deadline, stall, what)
            except OSError as exc:
                raise transfer_error(exc, f"file://{path}") from None
            status, _ = handle.close(timeout=int(stall))
            closed = True
            if not status.ok:
                raise transfer_error(status, what, side="destination")
            return sent
        except BaseException:
            _discard(handle, dst, closed)
            raise
    finally:
        os.close(fd)
        if release is not None:
            release()


def _one_flight(handle: xrd.File, fd: int, size: int, params: TransferParams,
                progress: ProgressFn | None, stall: float, what: str, *, pipelined: bool,
                read_back: bool) -> Upload:
    """A file of one write request: read it, then write + close (or write + read-back,
    close) pipelined (pipeline.finish): one round trip after the open, two to verify."""
    try:
        data = os.read(fd, size + 1)    # not CHUNK + 1: a 4 MiB buffer per file costs mmap
    except OSError as exc:
        raise transfer_error(exc, what) from None
    if len(data) != size:
        raise TransferError(ErrorClass.CHECKSUM, f"{what}: read {len(data)} bytes of "
                            f"{size} (source changed during the copy)")
    sent = normalise_adler32(adler32(data))
    wait = max(1.0, min(stall, params.timeout))
    stored = finish(handle, data, sent, read_back=read_back, params=params, wait=wait,
                    what=what, pipelined=pipelined)
    if progress is not None:
        progress(size, size)
    return Upload(bytes=size, adler32=sent, stored_adler32=stored)


def posc_honoured(url: str) -> bool:
    """False once an upload found that ``url``'s server ignores POSC (unknown: True)."""
    return _posc.get(server_of(url), True)


def claim_posc_probe(server: str) -> bool:
    """Is this upload the one to ask whether ``server`` honours POSC (its first)? One probe
    per server, even with concurrent uploads; honoured is assumed meanwhile."""
    if server in _posc:                 # every upload asks: no lock once the answer is known
        return False
    with _posc_lock:
        if server in _posc:
            return False
        _posc[server] = True
        return True


def posc_probed(server: str, flags: int) -> None:
    """The probe's answer: the stat flags of a file held open with POSC on ``server``."""
    if not flags & StatInfoFlags.POSC_PENDING:
        _posc[server] = False


def _probe_posc(dst: str) -> None:
    """First upload to a server: is the file we hold open POSC-pending there?"""
    server = server_of(dst)
    if not claim_posc_probe(server):
        return
    status, info = xrd.FileSystem(server).stat(xpath(dst), timeout=CLEANUP_TIMEOUT)
    if status.ok:
        posc_probed(server, info.flags)


def _discard(handle: xrd.File, dst: str, closed: bool) -> None:
    """Remove what this upload created at ``dst`` (a closed POSC file is permanent)."""
    with contextlib.suppress(Exception):        # best effort; the original error wins
        xrd.FileSystem(server_of(dst)).rm(xpath(dst), timeout=CLEANUP_TIMEOUT)
    if not closed:
        with contextlib.suppress(Exception):
            handle.close(timeout=CLEANUP_TIMEOUT)
