"""Small files in one ctypes call without the GIL: native/relay.cpp (libgxrelay.so).

Two entry points, each with the contract of its Python twin: ``relay`` (root -> root,
relay.py) and ``upload`` (file -> root of one write request, upload.py's one flight); and
``upload_many``, a bundle of uploads in one call (bundle.py). An upload resolves its local
source's links on the open file against ``TransferParams.source_base`` (BAD_NAME outside).

Why (issue 21): the Python relay costs ~1.2 CPU-ms a file, most of it Python waking for
each of XrdCl's replies; on 2 cores that, not the link, capped small files over the WAN
(docs/performance-notes.md, "the native relay"). relay.cpp sends the same requests in the
same flights through XrdCl's C++ API, and the whole copy is one ctypes call (ctypes lets
go of the GIL for it). Everything with a policy stays here: the URLs and their tokens,
read-back or not, the POSC probe's verdict, the error classes and messages (those of
relay.py, word for word), the latency ``observe``d for ``pipeline.far``.

``available()`` is False when the library was not built (``make`` builds it: the
Makefile's ``native`` target, g++ and libxrootd-client-dev) or ``GRIDXFER_XRD_NATIVE=0``:
relay.py then does the same work in Python. The C interface itself (structs, argument
types, loading, cancel flags) is relayabi.py's.
"""
from __future__ import annotations

import ctypes
import itertools
import logging
import os
from collections.abc import Sequence

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import NOT_STARTED as NOT_STARTED_MESSAGE, Cancel, ProgressFn, \
    TransferParams
from gridxfer.movers.classify import transfer_error
from gridxfer.movers.names import bad_name, real_dir
from gridxfer.movers.urls import server_of, with_user
from gridxfer.movers.xrootd.authz import xpath, xurl
from gridxfer import envsettings
from gridxfer.movers.xrootd.pipeline import observe
from gridxfer.movers.xrootd import NATIVE_VAR  # noqa: F401  (re-exported, as library is)
from gridxfer.movers.xrootd.relayabi import (  # noqa: F401  (library: re-exported)
    BACK_ADLER, BACK_LENGTH, CANCELLED, EXPECTED, IS_DIR, LOCAL_ERROR, NOT_STARTED, NOTIFY, OK,
    OUTSIDE, SHORT_READ, TOO_LARGE, XRD_ERROR, Item, Result, cancels, functions, library)
from gridxfer.movers.xrootd import relay as pyrelay
from gridxfer.movers.xrootd.relay import TooLarge
from gridxfer.movers.xrootd.upload import (CHUNK, CLEANUP_TIMEOUT, READ_BACK_MAX, Upload,
                                           claim_posc_probe, posc_probed)
from gridxfer.movers.xrootd.watch import stall_timeout

CHANNELS_VAR = "GRIDXFER_XRD_SMALL_CHANNELS"
_turn = itertools.count()
log = logging.getLogger(__name__)
_NO_NOTIFY = NOTIFY()               # NULL: relay.cpp calls nothing


class _Status:
    """What classify reads of an XRootDStatus (code, errno, message, shellcode)."""

    def __init__(self, r: Result) -> None:
        self.status, self.code, self.errno = r.status, r.code, r.errNo
        self.message = r.message.decode(errors="replace")
        self.shellcode = r.code // 100 + 50 if r.status else 0

    def __str__(self) -> str:
        return self.message


def available() -> bool:
    return functions is not None


def channels() -> int:
    """Connections the small files to one server take turns on (``GRIDXFER_XRD_SMALL_CHANNELS``,
    1-16; bad values: the default). XrdCl sends every request to one host:port + login over
    one connection, and xrootd runs one connection's requests one at a time, so a second
    login name is a second connection whose requests the server runs beside the first's."""
    return envsettings.count(CHANNELS_VAR)


def _hex8(text: str) -> bool:
    return len(text) == 8 and all(c in "0123456789abcdef" for c in text)


def usable(expected: str | None) -> bool:
    """Built, and the catalogue's adler32 (if any) is 8 hex digits (another matches no
    source: the Python twin says so in its own words)."""
    return functions is not None and (expected is None or _hex8(expected))


def run(src: str, dst: str, params: TransferParams, progress: ProgressFn | None, *,
        read_back: bool, expected: str | None = None) -> Upload:
    """relay.relay, in relay.cpp where it was built, else in Python."""
    if not usable(expected):
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
    the library is not usable: the caller takes posc_upload. A file that resolves outside
    ``params.source_base`` is refused (BAD_NAME) before anything is sent."""
    if not usable(expected):
        return None
    what = f"file://{path} -> {dst}"
    r = _call(1, [os.fsencode(path)], dst, params, what, CHUNK, read_back, expected)
    return uploaded(r, path, dst, params, expected, progress)


def uploaded(r: Result, path: str, dst: str, params: TransferParams, expected: str | None,
             progress: ProgressFn | None) -> Upload | None:
    """What gx_upload's result means: the Upload, None (too large: nothing was sent), or
    the TransferError raised."""
    if r.outcome == TOO_LARGE:
        return None
    if r.outcome == LOCAL_ERROR:
        raise transfer_error(OSError(r.errNo, os.strerror(r.errNo)), f"file://{path}")
    if r.outcome == IS_DIR:
        raise TransferError(ErrorClass.OTHER, f"file://{path}: source is a directory")
    if r.outcome == OUTSIDE:
        raise bad_name(f"file://{path}", f"resolves outside {params.source_base}")
    if r.outcome == NOT_STARTED:
        raise TransferError(ErrorClass.CANCELLED, NOT_STARTED_MESSAGE)
    return _outcome(r, f"file://{path}", f"file://{path} -> {dst}", expected, progress)


def source_root(params: TransferParams) -> bytes | None:
    """The real directory a local source must lie under (gx_upload's ``root``), or None."""
    return real_dir(params.source_base) if params.source_base else None


def _call(which: int, source: list[bytes], dst: str, params: TransferParams, what: str,
          max_size: int, read_back: bool, expected: str | None) -> Result:
    """One native copy to ``dst`` (``which``: 0 gx_relay, whose source gets the stall
    timeout, 1 gx_upload); its result (the POSC probe's verdict and the destination's
    latency recorded)."""
    if params.cancel is not None and params.cancel.is_set():
        raise TransferError(ErrorClass.CANCELLED, f"{what}: cancelled before start")
    assert functions is not None
    a = Prepared(dst, params, read_back, expected)
    r = Result()
    key, flag = (None, None) if params.cancel is None else cancels.add(params.cancel)
    notify = verified_notifier(params) if read_back else _NO_NOTIFY
    try:
        head = ((a.target, a.server_b, a.path, max_size, a.stall) if which == 0 else
                (a.target, a.server_b, a.path, source_root(params), max_size))
        functions[which](*source, *head, a.wait, a.has_expected, a.expected, a.read_back_max,
                         a.probe, CLEANUP_TIMEOUT, None if flag is None else ctypes.byref(flag),
                         notify, ctypes.byref(r))
    finally:
        if key is not None:
            cancels.remove(key)
    settle(a, r)
    return r


def verified_notifier(params: TransferParams) -> object:
    """relay.cpp's ``verified`` for this copy: ``params.data_done`` once the bytes read back
    matched and the close is sent (the slot is free while the close, which only makes the
    verified file visible, crosses the link: issue 21, 3 flights a file cost 2 of a slot's
    time). NULL without ``on_data_done``. An exception cannot cross the C++ frames: it is
    logged, and the copy goes on."""
    if params.on_data_done is None:
        return _NO_NOTIFY

    def verified() -> None:
        try:
            params.data_done()
        except Exception:                   # noqa: BLE001 - ctypes would print and drop it
            log.exception("data_done of a verified small file")
    return NOTIFY(verified)


class Prepared:
    """A native copy's arguments toward its destination, built in the caller's thread (its
    tokens: ``authz.bearer``) before the call."""
    __slots__ = ("target", "server", "server_b", "path", "stall", "wait", "has_expected",
                 "expected", "read_back_max", "probe")

    def __init__(self, dst: str, params: TransferParams, read_back: bool,
                 expected: str | None, settings: tuple[float, int] | None = None) -> None:
        self.stall, n = settings or Prepared.settings()
        self.wait = max(1.0, min(self.stall, params.timeout))
        self.server = server_of(dst)
        self.server_b = self.server.encode()
        self.probe = claim_posc_probe(self.server)
        k = next(_turn) % n if n > 1 else 0
        self.target = xurl(with_user(dst, f"gxs{k}") if k else dst).encode()
        self.path = xpath(dst).encode()
        self.has_expected = expected is not None
        self.expected = int(expected or "0", 16)
        self.read_back_max = READ_BACK_MAX if read_back else -1

    @staticmethod
    def settings() -> tuple[float, int]:
        """(stall timeout, channels) from the environment: read once for a bundle."""
        return stall_timeout(), channels()


def settle(a: Prepared, r: Result) -> None:
    """After a native copy: the POSC probe's verdict and the destination's latency kept."""
    if a.probe and r.posc_flags >= 0:
        posc_probed(a.server, r.posc_flags)
    if r.dst_open_s:
        observe(a.server, r.dst_open_s)


def upload_many(entries: Sequence[tuple[str, Prepared, TransferParams]], stop: Cancel | None
                ) -> tuple[list[Result], list[tuple[float, float]]]:
    """gx_upload of each ``(path, prepared, params)`` one after the other, in ONE native
    call (gx_upload_many): each result (``uploaded`` reads it) and when it began and ended
    (seconds from the call's start). ``stop`` (the bundle's first job's cancel) ends the
    copy in progress (CANCELLED) and the rest before they begin (NOT_STARTED)."""
    assert functions is not None
    n = len(entries)
    items, results, times = (Item * n)(), (Result * n)(), (ctypes.c_double * (2 * n))()
    key, flag = (None, None) if stop is None else cancels.add(stop)
    if flag is not None and stop is not None and stop.is_set():
        flag.value = 1                  # already stopped: nothing begins
    cancel = None if flag is None else ctypes.pointer(flag)
    for it, (path, a, params) in zip(items, entries, strict=True):
        it.path, it.dst, it.dst_server = os.fsencode(path), a.target, a.server_b
        it.dst_path, it.root, it.max_size, it.wait = a.path, source_root(params), CHUNK, a.wait
        it.has_expected, it.expected = a.has_expected, a.expected
        it.read_back_max, it.probe_posc = a.read_back_max, a.probe
        it.cleanup_timeout, it.cancel = CLEANUP_TIMEOUT, cancel
    try:
        functions[2](n, items, cancel, results, times)
    finally:
        if key is not None:
            cancels.remove(key)
    for (_, a, _), r in zip(entries, results, strict=True):
        settle(a, r)
    return list(results), [(times[2 * k], times[2 * k + 1]) for k in range(n)]


def _hex(value: int) -> str:
    return f"{value:08x}"


def _outcome(r: Result, src: str, what: str, expected: str | None,
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
