"""Small files in one ctypes call without the GIL: native/relay.cpp (libgxrelay.so).

Two entry points, each with the contract of its Python twin: ``relay`` (root -> root,
relay.py) and ``upload`` (file -> root of one write request, upload.py's one flight).

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
import itertools
import os
import threading
import time
from pathlib import Path
from typing import Any

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import Cancel, ProgressFn, TransferParams
from gridxfer.movers.classify import transfer_error
from gridxfer.movers.urls import with_user
from gridxfer.movers.xrootd.authz import xpath, xurl
from gridxfer.movers.xrootd.cksum import server_of
from gridxfer.movers.xrootd.env import bounded_int
from gridxfer.movers.xrootd.pipeline import observe
from gridxfer.movers.xrootd import relay as pyrelay
from gridxfer.movers.xrootd.relay import TooLarge
from gridxfer.movers.xrootd.upload import (CHUNK, CLEANUP_TIMEOUT, READ_BACK_MAX, Upload,
                                           claim_posc_probe, posc_probed)
from gridxfer.movers.xrootd.watch import stall_timeout

NATIVE_VAR = "GRIDXFER_XRD_NATIVE"
CHANNELS_VAR = "GRIDXFER_XRD_SMALL_CHANNELS"
DEFAULT_CHANNELS = 1
_turn = itertools.count()
LIBRARY = Path(__file__).with_name("native") / "libgxrelay.so"

# relay.cpp's outcomes
OK, XRD_ERROR, TOO_LARGE, SHORT_READ, EXPECTED, BACK_LENGTH, BACK_ADLER, CANCELLED, \
    TIMEOUT, LOCAL_ERROR, IS_DIR = range(11)


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


_STR, _U64, _F64, _I32 = ctypes.c_char_p, ctypes.c_uint64, ctypes.c_double, ctypes.c_int32
# gx_relay(src, dst, ...), gx_upload(path, dst, ...); then, for both: dst_server, dst_path,
# max_size, [stall,] wait, has_expected, expected, read_back_max, probe_posc,
# cleanup_timeout, cancel, result
_TAIL = [ctypes.c_int32, ctypes.c_uint32, ctypes.c_int64, ctypes.c_int32, ctypes.c_uint16,
         ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(_Result)]
_ARGS = {"gx_relay": [_STR, _STR, _STR, _STR, _U64, _F64, _F64, *_TAIL],
         "gx_upload": [_STR, _STR, _STR, _STR, _U64, _F64, *_TAIL]}


def _load() -> Any:
    """(gx_relay, gx_upload), or None: not built, not loadable, or switched off."""
    if os.environ.get(NATIVE_VAR, "1") == "0" or not LIBRARY.is_file():
        return None
    try:
        lib = library()
        fns = tuple(getattr(lib, name) for name in _ARGS)
    except (OSError, AttributeError):
        return None
    for fn, args in zip(fns, _ARGS.values(), strict=True):
        fn.restype, fn.argtypes = ctypes.c_int, args
    return fns


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


def channels() -> int:
    """Connections the small files to one server take turns on (``GRIDXFER_XRD_SMALL_CHANNELS``,
    1-16; bad values: the default). XrdCl sends every request to one host:port + login over
    one connection, and xrootd runs one connection's requests one at a time, so a second
    login name is a second connection whose requests the server runs beside the first's."""
    return bounded_int(CHANNELS_VAR, DEFAULT_CHANNELS, 1, 16)


def _hex8(text: str) -> bool:
    return len(text) == 8 and all(c in "0123456789abcdef" for c in text)


def _usable(expected: str | None) -> bool:
    """Built, and the catalogue's adler32 (if any) is 8 hex digits (another matches no
    source: the Python twin says so in its own words)."""
    return _relay is not None and (expected is None or _hex8(expected))


def run(src: str, dst: str, params: TransferParams, progress: ProgressFn | None, *,
        read_back: bool, expected: str | None = None) -> Upload:
    """relay.relay, in relay.cpp where it was built, else in Python."""
    if not _usable(expected):
        return pyrelay.relay(src, dst, params, progress, read_back=read_back, expected=expected)
    return relay(src, dst, params, progress, read_back=read_back, expected=expected)


def relay(src: str, dst: str, params: TransferParams, progress: ProgressFn | None, *,
          read_back: bool, expected: str | None = None) -> Upload:
    """relay.relay's contract, in relay.cpp (only when ``available()``)."""
    what = f"{src} -> {dst}"
    r = _call(0, [xurl(src).encode()], dst, params, what, pyrelay.RELAY_MAX, read_back,
              expected)
    if r.src_open_s:
        observe(server_of(src), r.src_open_s)
    if r.outcome == XRD_ERROR and r.side == 0:
        raise transfer_error(_Status(r), src)
    if r.outcome == TOO_LARGE:
        raise TooLarge(src)
    return _outcome(r, src, what, expected, progress)


def upload(path: str, dst: str, params: TransferParams, progress: ProgressFn | None, *,
           read_back: bool, expected: str | None = None) -> Upload | None:
    """upload.posc_upload's contract for a local file of one write request (at most
    ``upload.CHUNK``), in relay.cpp; None for a larger one (nothing was sent) or where
    the library is not usable: the caller takes posc_upload."""
    if not _usable(expected):
        return None
    what = f"file://{path} -> {dst}"
    r = _call(1, [os.fsencode(path)], dst, params, what, CHUNK, read_back, expected)
    if r.outcome == TOO_LARGE:
        return None
    if r.outcome == LOCAL_ERROR:
        raise transfer_error(OSError(r.errNo, os.strerror(r.errNo)), f"file://{path}")
    if r.outcome == IS_DIR:
        raise TransferError(ErrorClass.OTHER, f"file://{path}: source is a directory")
    return _outcome(r, f"file://{path}", what, expected, progress)


def _call(which: int, source: list[bytes], dst: str, params: TransferParams, what: str,
          max_size: int, read_back: bool, expected: str | None) -> _Result:
    """One native copy to ``dst`` (``which``: 0 gx_relay, whose source gets the stall
    timeout, 1 gx_upload); its result (the POSC probe's verdict and the destination's
    latency recorded)."""
    if params.cancel is not None and params.cancel.is_set():
        raise TransferError(ErrorClass.CANCELLED, f"{what}: cancelled before start")
    assert _relay is not None
    stall = stall_timeout()
    wait = max(1.0, min(stall, params.timeout))
    server = server_of(dst)
    probe = claim_posc_probe(server)
    r = _Result()
    n = channels()
    k = next(_turn) % n if n > 1 else 0
    target = with_user(dst, f"gxs{k}") if k else dst
    key, flag = (None, None) if params.cancel is None else _cancels.add(params.cancel)
    try:
        _relay[which](*source, xurl(target).encode(), server.encode(), xpath(dst).encode(),
                      max_size, *([stall] if which == 0 else []), wait, expected is not None,
                      int(expected or "0", 16),
                      READ_BACK_MAX if read_back else -1, probe, CLEANUP_TIMEOUT,
                      None if flag is None else ctypes.byref(flag), ctypes.byref(r))
    finally:
        if key is not None:
            _cancels.remove(key)
    if probe and r.posc_flags >= 0:
        posc_probed(server, r.posc_flags)
    if r.dst_open_s:
        observe(server, r.dst_open_s)
    return r


def _hex(value: int) -> str:
    return f"{value:08x}"


def _outcome(r: _Result, src: str, what: str, expected: str | None,
             progress: ProgressFn | None) -> Upload:
    """The Upload of a copy that ended OK; else the TransferError relay.py would raise."""
    o = r.outcome
    if o == OK:
        n = int(r.size)
        if progress is not None:
            progress(n, n)
        return Upload(bytes=n, adler32=_hex(r.adler),
                      stored_adler32=_hex(r.stored) if r.has_stored else None)
    if o == XRD_ERROR:
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
