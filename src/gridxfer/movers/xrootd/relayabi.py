"""libgxrelay.so's C interface (native/relay.cpp): its outcomes, the structs of a result
and of a bundle's item, each function's argument types, the loading, and the cancel flags
the calls read. relaynative.py holds what the calls mean.

``GRIDXFER_XRD_NATIVE=0`` (or no library built: the Makefile's ``native`` target) leaves
``functions`` None; the movers then do the same work in Python.

Cancel: a call reads an int while it waits; one thread (``relay-cancel``, started with
the first cancellable copy) sets it within 0.25 s of the copy's cancel flag.
"""
from __future__ import annotations

import ctypes
import threading
import time
from typing import Any

from gridxfer.movers.base import Cancel
from gridxfer.movers.xrootd import NATIVE_LIBRARY, native_off

# relay.cpp's outcomes
OK, XRD_ERROR, TOO_LARGE, SHORT_READ, EXPECTED, BACK_LENGTH, BACK_ADLER, CANCELLED, \
    TIMEOUT, LOCAL_ERROR, IS_DIR, OUTSIDE, NOT_STARTED = range(13)


class Result(ctypes.Structure):
    """relay.cpp's gx_result."""
    _fields_ = [("outcome", ctypes.c_int32), ("side", ctypes.c_int32),
                ("status", ctypes.c_uint16), ("code", ctypes.c_uint16),
                ("errNo", ctypes.c_uint32), ("size", ctypes.c_uint64),
                ("got", ctypes.c_uint64), ("adler", ctypes.c_uint32),
                ("stored", ctypes.c_uint32), ("has_stored", ctypes.c_int32),
                ("posc_flags", ctypes.c_int32), ("src_open_s", ctypes.c_double),
                ("dst_open_s", ctypes.c_double), ("wait_s", ctypes.c_double),
                ("message", ctypes.c_char * 1024)]


def library() -> ctypes.CDLL:
    """The loaded libgxrelay.so (OSError if it cannot be loaded)."""
    return ctypes.CDLL(str(NATIVE_LIBRARY))


class Item(ctypes.Structure):
    """One upload of gx_upload_many: gx_upload's arguments."""
    _fields_ = [("path", ctypes.c_char_p), ("dst", ctypes.c_char_p),
                ("dst_server", ctypes.c_char_p), ("dst_path", ctypes.c_char_p),
                ("root", ctypes.c_char_p), ("max_size", ctypes.c_uint64),
                ("wait", ctypes.c_double), ("has_expected", ctypes.c_int32),
                ("expected", ctypes.c_uint32), ("read_back_max", ctypes.c_int64),
                ("probe_posc", ctypes.c_int32), ("cleanup_timeout", ctypes.c_uint16),
                ("cancel", ctypes.POINTER(ctypes.c_int32))]


# gx_notify: called in the caller's thread once a read-back matched and the close is sent
# (ctypes takes the GIL back for it); NOTIFY() is the NULL one (ctypes refuses None for it)
NOTIFY = ctypes.CFUNCTYPE(None)

_STR, _U64, _F64 = ctypes.c_char_p, ctypes.c_uint64, ctypes.c_double
# gx_relay(src, dst, dst_server, dst_path, max_size, stall, ...), gx_upload(path, dst,
# dst_server, dst_path, root, max_size, ...); then, for both: wait, has_expected, expected,
# read_back_max, probe_posc, cleanup_timeout, cancel, verified, result
_TAIL = [ctypes.c_int32, ctypes.c_uint32, ctypes.c_int64, ctypes.c_int32, ctypes.c_uint16,
         ctypes.POINTER(ctypes.c_int32), NOTIFY, ctypes.POINTER(Result)]
_ARGS = {"gx_relay": [_STR, _STR, _STR, _STR, _U64, _F64, _F64, *_TAIL],
         "gx_upload": [_STR, _STR, _STR, _STR, _STR, _U64, _F64, *_TAIL],
         "gx_upload_many": [ctypes.c_int32, ctypes.POINTER(Item), ctypes.POINTER(ctypes.c_int32),
                            ctypes.POINTER(Result), ctypes.POINTER(ctypes.c_double)]}


def _load() -> Any:
    """(gx_relay, gx_upload, gx_upload_many), or None: not built, not loadable, or switched off."""
    if native_off() or not NATIVE_LIBRARY.is_file():
        return None
    try:
        lib = library()
        fns = tuple(getattr(lib, name) for name in _ARGS)
    except (OSError, AttributeError):
        return None
    for fn, args in zip(fns, _ARGS.values(), strict=True):
        fn.restype, fn.argtypes = ctypes.c_int, args
    return fns


functions = _load()     # (gx_relay, gx_upload, gx_upload_many), or None


class Cancels:
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


cancels = Cancels()
