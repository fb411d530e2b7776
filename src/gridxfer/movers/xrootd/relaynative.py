"""relay.py's small-file relay, run by native/relay.cpp (libgxrelay.so) without the GIL.

Why (issue 21): the Python relay costs ~1.2 CPU-ms a file, most of it Python waking for
each of XrdCl's replies; on 2 cores that, not the link, capped small files over the WAN
(docs/performance-notes.md, "the native relay"). relay.cpp sends the same requests in the
same flights through XrdCl's C++ API, and the whole copy is one ctypes call (ctypes lets
go of the GIL for it). Everything with a policy stays here: the URLs and their tokens,
read-back or not, the POSC probe's verdict, the error classes and messages (those of
relay.py, word for word), the latency ``observe``d for ``pipeline.far``.

``available()`` is False when the library was not built (``make`` builds it: the
Makefile's ``native`` target, g++ and libxrootd-client-dev) or ``GRIDXFER_XRD_NATIVE=0``:
relay.py then does the same work in Python.

Cancel: the call reads an int while it waits; one thread (``relay-cancel``, started with
the first cancellable copy) sets it within 0.25 s of the copy's cancel flag.
"""
from __future__ import annotations

import ctypes
import os
import threading
import time
from pathlib import Path
from typing import Any

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import Cancel, ProgressFn, TransferParams
from gridxfer.movers.classify import transfer_error
from gridxfer.movers.xrootd.authz import xpath, xurl
from gridxfer.movers.xrootd.cksum import server_of
from gridxfer.movers.xrootd.pipeline import observe
from gridxfer.movers.xrootd import relay as pyrelay
from gridxfer.movers.xrootd.relay import TooLarge
from gridxfer.movers.xrootd.upload import (CLEANUP_TIMEOUT, READ_BACK_MAX, Upload, _posc,
                                           _posc_lock)
from gridxfer.movers.xrootd.watch import stall_timeout

NATIVE_VAR = "GRIDXFER_XRD_NATIVE"
LIBRARY = Path(__file__).with_name("native") / "libgxrelay.so"
POSC_PENDING = 16               # XrdCl StatInfo::POSCPending (kXR_poscpend)

# relay.cpp's outcomes
OK, XRD_ERROR, TOO_LARGE, SHORT_READ, EXPECTED, BACK_LENGTH, BACK_ADLER, CANCELLED, \
    TIMEOUT = range(9)


class _Result(ctypes.Structure):
    _fields_ = [("outcome", ctypes.c_int32), ("side", ctypes.c_int32),
                ("status", ctypes.c_uint16), ("code", ctypes.c_uint16),
                ("errNo", ctypes.c_uint32), ("size", ctypes.c_uint64),
                ("got", ctypes.c_uint64), ("adler", ctypes.c_uint32),
                ("stored", ctypes.c_uint32), ("has_stored", ctypes.c_int32),
                ("posc_flags", ctypes.c_int32), ("src_open_s", ctypes.c_double),
                ("dst_open_s", ctypes.c_double), ("wait_s", ctypes.c_double),
                ("message", ctypes.c_char * 1024)]


class _Status:
    """What classify reads of an XRootDStatus (code, errno, message, shellcode)."""

    def __init__(self, r: _Result) -> None:
        self.status, self.code, self.errno = r.status, r.code, r.errNo
        self.message = r.message.decode(errors="replace")
        self.shellcode = r.code // 100 + 50 if r.status else 0

    def __str__(self) -> str:
        return self.message


def library() -> ctypes.CDLL:
    """The loaded libgxrelay.so (OSError if it cannot be loaded)."""
    return ctypes.CDLL(str(LIBRARY))


def _load() -> Any:
    if os.environ.get(NATIVE_VAR, "1") == "0" or not LIBRARY.is_file():
        return None
    try:
        fn = library().gx_relay
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                   ctypes.c_uint64, ctypes.c_double, ctypes.c_double, ctypes.c_int32,
                   ctypes.c_uint32, ctypes.c_int64, ctypes.c_int32, ctypes.c_uint16,
                   ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(_Result)]
    return fn


_relay = _load()


def available() -> bool:
    return _relay is not None


class _Cancels:
    """Copies in flight with a cancel flag -> the int their native call reads."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.flags: dict[int, tuple[Cancel, ctypes.c_int32]] = {}
        self.thread: threading.Thread | None = None

    def add(self, cancel: Cancel) -> tuple[int, ctypes.c_int32]:
        flag = ctypes.c_int32(0)
        with self.cond:
            key = id(flag)
            self.flags[key] = (cancel, flag)
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="relay-cancel",
                                               daemon=True)
                self.thread.start()
            self.cond.notify()
        return key, flag

    def remove(self, key: int) -> None:
        with self.cond:
            self.flags.pop(key, None)

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self.flags:
                    self.cond.wait()
                items = list(self.flags.values())
            for cancel, flag in items:
                if cancel.is_set():
                    flag.value = 1
            time.sleep(0.25)


_cancels = _Cancels()


def _hex8(text: str) -> bool:
    return len(text) == 8 and all(c in "0123456789abcdef" for c in text)


def run(src: str, dst: str, params: TransferParams, progress: ProgressFn | None, *,
        read_back: bool, expected: str | None = None) -> Upload:
    """relay.relay: in relay.cpp where it was built, else (or for a catalogue adler32 that
    is not 8 hex digits, which no source matches) in Python."""
    if _relay is None or (expected is not None and not _hex8(expected)):
        return pyrelay.relay(src, dst, params, progress, read_back=read_back, expected=expected)
    return relay(src, dst, params, progress, read_back=read_back, expected=expected)


def relay(src: str, dst: str, params: TransferParams, progress: ProgressFn | None, *,
          read_back: bool, expected: str | None = None) -> Upload:
    """relay.relay's contract, in relay.cpp (call only when ``available()``)."""
    what = f"{src} -> {dst}"
    if params.cancel is not None and params.cancel.is_set():
        raise TransferError(ErrorClass.CANCELLED, f"{what}: cancelled before start")
    stall = stall_timeout()
    wait = max(1.0, min(stall, params.timeout))
    server = server_of(dst)
    with _posc_lock:
        probe = server not in _posc
        if probe:
            _posc[server] = True        # one probe per server, as upload._probe_posc
    r = _Result()
    key, flag = (None, None) if params.cancel is None else _cancels.add(params.cancel)
    try:
        _relay(xurl(src).encode(), xurl(dst).encode(), server.encode(), xpath(dst).encode(),
               pyrelay.RELAY_MAX, stall, wait, expected is not None, int(expected or "0", 16),
               READ_BACK_MAX if read_back else -1, probe, CLEANUP_TIMEOUT,
               None if flag is None else ctypes.byref(flag), ctypes.byref(r))
    finally:
        if key is not None:
            _cancels.remove(key)
    if probe and r.posc_flags >= 0 and not r.posc_flags & POSC_PENDING:
        _posc[server] = False
    if r.src_open_s:
        observe(server_of(src), r.src_open_s)
    if r.dst_open_s:
        observe(server, r.dst_open_s)
    return _outcome(r, src, what, expected, progress)


def _hex(value: int) -> str:
    return f"{value:08x}"


def _outcome(r: _Result, src: str, what: str, expected: str | None,
             progress: ProgressFn | None) -> Upload:
    o = r.outcome
    if o == OK:
        n = int(r.size)
        if progress is not None:
            progress(n, n)
        return Upload(bytes=n, adler32=_hex(r.adler),
                      stored_adler32=_hex(r.stored) if r.has_stored else None)
    if o == TOO_LARGE:
        raise TooLarge(src)
    if o == XRD_ERROR:
        if r.side == 0:
            raise transfer_error(_Status(r), src)
        raise transfer_error(_Status(r), what, side="destination")
    if o == SHORT_READ:
        raise TransferError(ErrorClass.CHECKSUM, f"{what}: read {r.got} bytes of {r.size} "
                            "(source changed during the copy)")
    if o == EXPECTED:
        raise TransferError(ErrorClass.CHECKSUM, f"{src}: source adler32 {_hex(r.adler)} != "
                            f"expected {expected}")
    if o == BACK_LENGTH:
        raise TransferError(ErrorClass.CHECKSUM, f"{what}: the server holds a different "
                            f"number of bytes than the {r.size} sent")
    if o == BACK_ADLER:
        raise TransferError(ErrorClass.CHECKSUM, f"{what}: adler32 {_hex(r.stored)} read back "
                            f"!= source {_hex(r.adler)}")
    if o == CANCELLED:
        raise TransferError(ErrorClass.CANCELLED, f"{what}: cancelled")
    raise TransferError(ErrorClass.TIMEOUT, f"{what}: no reply in {r.wait_s:.0f} s")
