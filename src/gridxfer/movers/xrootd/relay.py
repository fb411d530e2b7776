"""root -> root through this host for small files: the final name under POSC, pipelined.

The general root -> root path (``verified_copy`` around XrdCl's CopyProcess) costs the
destination about 6.5 round trips per file (bench.smallfiles --wan, counted on the
destination's interface): a stat for "exists?", CopyProcess's own stats, open, write,
close, a stat of the temporary name, the rename, a checksum query. Over a 20 ms link that
is 130 ms of waiting for a 4 KB file. A file of at most ``RELAY_MAX`` bytes goes here
instead, and the destination sees:

* flight 1: ``open`` of the FINAL name with ``kXR_new | kXR_posc | kXR_mkpath`` (upload.py:
  an existing file fails the open with EXISTS, nothing is touched; missing directories are
  made; the server keeps the file only if ``close`` succeeds). It is sent once the source
  is open (a missing or too large source never touches the destination) and is in flight
  while the source is read (its size from the open's cached stat, then read and close
  in one flight);
* flight 2: ``write`` and ``close`` back to back (XRootD answers a connection's requests
  in order; nothing of the close depends on the write's reply except its success: xrootd
  unlinks a POSC file whose write failed before it handles the close, which then succeeds
  on nothing; pipeline.py). Without checksums that is all: 2 round trips.
* With destination verification, for a file of at most ``upload.READ_BACK_MAX`` (64 KiB,
  where round trips are the cost; a larger one is closed, then the server's adler32 is
  asked and a mismatch deleted, as the direct upload does: sending 4 MB back halved a
  throttled server's rate): ``write`` and a read-back ``read`` in flight 2, ``close``
  in flight 3 only after the bytes the server returns matched the adler32 of the bytes
  read from the source (a mismatch leaves nothing: the POSC file is dropped unclosed).
  The read-back is answered from the server's file, the same end-to-end check as a
  checksum query without xrootd's checksum jobs (``kXR_wait 30`` past ``xrootd.chksum
  max``); the return path of a link is idle while data flows out, so reading 1 MB back
  costs no capacity the copy needs. Should a server run the read before the write ended
  (asynchronous I/O), the first read-back differs: it is read again once the write is
  acknowledged, and only that second answer can fail the copy.

The source's adler32 ("verify source") is that of the bytes the source server sent; the
catalogue's expected value, if any, is compared with it. Sessions: every request goes over
XrdCl's channel to each server (one TCP connection per host:port + login, kept for the
process), so a campaign logs in once per server. Used by ``XRootDMover.copy`` when overwrite
is off and the server honours POSC (``upload.posc_honoured``); anything else (larger
files, replace, a server that ignores POSC) takes the general path.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from XRootD.client.flags import OpenFlags

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.adler import adler32
from gridxfer.movers.base import ProgressFn, TransferParams, normalise_adler32
from gridxfer.movers.classify import transfer_error
from gridxfer.movers.xrootd.authz import xurl
from gridxfer.movers.xrootd.env import client as xrd
from gridxfer.movers.urls import server_of
from gridxfer.movers.xrootd.pipeline import Reply, bundled_close, far, finish, observe, send
from gridxfer.movers.xrootd.upload import FLAGS, READ_BACK_MAX, Upload, _discard, _probe_posc
from gridxfer.movers.xrootd.watch import stall_timeout

RELAY_MAX = 4 << 20             # bytes: one write request, held in memory once


class TooLarge(Exception):
    """The source is larger than RELAY_MAX: take the general path (nothing was written)."""


@dataclass(frozen=True)
class _Source:
    data: bytes
    adler32: str


def _open_source(src: str, stall: float) -> tuple[Any, int]:
    """The open source and its size (the open's cached stat: no request of its own);
    TooLarge, with the file closed, if it has more than RELAY_MAX bytes."""
    f = xrd.File()
    if far(server_of(src)):
        bundled_close(f)            # its read and close go in one flight (_read_source)
    opened_at = time.monotonic()
    status, _ = f.open(xurl(src), OpenFlags.READ, timeout=max(1, int(stall)))
    if not status.ok:
        raise transfer_error(status, src)
    observe(server_of(src), time.monotonic() - opened_at)
    try:
        status, info = f.stat(timeout=max(1, int(stall)))
        if not status.ok:
            raise transfer_error(status, src)
        if int(info.size) > RELAY_MAX:
            raise TooLarge(src)
    except BaseException:
        f.close(timeout=max(1, int(stall)))
        raise
    return f, int(info.size)


def _read_source(f: Any, size: int, src: str, params: TransferParams, stall: float,
                 what: str) -> _Source:
    """All ``size`` bytes of the open source ``f`` (one read), then closed: read and close
    back to back where the source is far (pipeline.far), one after the other where near."""
    tmo = max(1, int(stall))
    if not far(server_of(src)):
        try:
            status, data = f.read(0, size + 1, timeout=tmo)
        finally:
            f.close(timeout=tmo)
    else:
        read = send(f.read, 0, size + 1, timeout=tmo)
        closing = send(f.close, timeout=tmo)
        try:
            status = read.wait(stall + 5, params, what)
            data = read.response
        finally:
            closing.done.wait(stall + 5)    # a failed close of a file read in full is harmless
    if not status.ok:
        raise transfer_error(status, src)
    data = data or b""
    if len(data) != size:
        raise TransferError(ErrorClass.CHECKSUM, f"{what}: read {len(data)} bytes of "
                            f"{size} (source changed during the copy)")
    return _Source(data, normalise_adler32(adler32(data)))


def _abandon(opened: Reply, handle: Any, dst: str, params: TransferParams,
             wait: float, what: str) -> None:
    """The copy failed before it wrote: remove the destination if its open succeeded."""
    try:
        status = opened.wait(wait + 5, params, what)
    except TransferError:
        return
    if status is not None and status.ok:
        _discard(handle, dst, closed=False)


def relay(src: str, dst: str, params: TransferParams, progress: ProgressFn | None, *,
          read_back: bool, expected: str | None = None) -> Upload:
    """Copy root:// ``src`` (at most RELAY_MAX bytes) to the new root:// file ``dst``; on
    failure nothing is left at ``dst``. ``read_back``: ``stored_adler32`` is the adler32 of
    what the server holds before the close (a different length is a CHECKSUM error), for
    a file of at most ``READ_BACK_MAX`` bytes, as the direct upload (None above it: the
    caller asks the server).
    ``expected``: the catalogue's adler32, compared with the source's bytes before anything
    is written (a failed destination open is reported first, as on the general path)."""
    what = f"{src} -> {dst}"
    if params.cancel is not None and params.cancel.is_set():
        raise TransferError(ErrorClass.CANCELLED, f"{what}: cancelled before start")
    stall = stall_timeout()
    wait = max(1.0, min(stall, params.timeout))
    tmo = max(1, int(wait))
    f, size = _open_source(src, stall)         # missing, unreadable, too large: dst untouched
    handle = xrd.File()
    pipelined = far(server_of(dst))     # a near destination: one request at a time
    if pipelined:
        bundled_close(handle)
    if pipelined:
        opened = send(handle.open, xurl(dst), FLAGS, timeout=tmo)   # in flight during the read
    try:
        source = _read_source(f, size, src, params, stall, what)
    except BaseException:
        if pipelined:
            _abandon(opened, handle, dst, params, wait, what)
        raise
    if pipelined:
        status = opened.wait(wait + 5, params, what)
        observe(server_of(dst), opened.seconds)
    else:
        opened_at = time.monotonic()
        status, _ = handle.open(xurl(dst), FLAGS, timeout=tmo)
        observe(server_of(dst), time.monotonic() - opened_at)
    if not status.ok:
        raise transfer_error(status, what, side="destination")
    try:
        _probe_posc(dst)
        if expected and source.adler32 != expected:     # nothing written yet
            raise TransferError(ErrorClass.CHECKSUM,
                                f"{src}: source adler32 {source.adler32} != expected {expected}")
        read_back = read_back and len(source.data) <= READ_BACK_MAX
        stored = finish(handle, source.data, source.adler32, read_back=read_back,
                        params=params, wait=wait, what=what, pipelined=pipelined)
        n = len(source.data)
        if progress is not None:
            progress(n, n)
        return Upload(bytes=n, adler32=source.adler32, stored_adler32=stored)
    except BaseException:
        _discard(handle, dst, closed=False)     # a close sent or not: rm, then close
        raise
