"""A worker's bundle of small local files to root://, in ONE native call (``copy_many``).

Why (issue 21, loopback: 5,000 x 4 KB at 8): each native upload is one ctypes call that
lets go of the GIL, and each return took it back from eight other workers and the
dispatcher on a 2-core host. Every such hand-over, and the three system calls of the
source's real-path check, cost more than the C++ copy itself (docs/performance-notes.md,
"One native call a bundle"). Here the bundle's uploads go to ``gx_upload_many``: the GIL
is let go of once for the bundle, and the source's links are resolved in C++ on the file
descriptor actually read (``TransferParams.source_base``).

Each copy keeps ``XRootDMover.copy``'s contract: the same requests, checks and errors.
Copies the native upload cannot take (another pair, TPC, a server without POSC, a
larger file, a catalogue checksum that is not 8 hex digits, an existing destination with
``overwrite``) go through ``mover.copy`` after the call, one at a time.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import NOT_STARTED, Cancel, Copied, TransferOutcome, TransferParams
from gridxfer.movers.integrity import checksum_policy
from gridxfer.movers.urls import local_path, scheme_of
from gridxfer.movers.xrootd import relaynative
from gridxfer.movers.xrootd.authz import as_auth, bearer
from gridxfer.movers.xrootd.upload import posc_honoured

if TYPE_CHECKING:
    from gridxfer.movers.xrootd.mover import XRootDMover


class _Native(NamedTuple):
    at: int                     # its place in the bundle
    src: str
    path: str                   # the source's local path
    dst: str
    params: TransferParams
    expected: str | None
    prepared: relaynative.Prepared


def copy_many(mover: XRootDMover, jobs: Sequence[tuple[str, str, TransferParams]],
              stop: Cancel | None) -> list[Copied]:
    t0 = time.monotonic()
    done: dict[int, Copied] = {}
    settings = relaynative.Prepared.settings()
    native = [n for n in (_native(i, *job, settings) for i, job in enumerate(jobs))
              if n is not None]
    if native:                  # _native took none unless the library is loaded
        entries = [(n.path, n.prepared, n.params) for n in native]
        results, times = relaynative.upload_many(entries, stop)
        for n, r, (began, ended) in zip(native, results, times, strict=True):
            copied = _judge(mover, n, r, began, ended)
            if copied is not None:
                done[n.at] = copied
    for i, (src, dst, params) in enumerate(jobs):      # the rest, one at a time
        if i not in done:
            done[i] = _alone(mover, src, dst, params, stop, t0)
    return [done[i] for i in range(len(jobs))]


def _native(i: int, src: str, dst: str, params: TransferParams,
            settings: tuple[float, int]) -> _Native | None:
    """The native upload's arguments for job ``i``, or None: not one it can take."""
    if (scheme_of(src), scheme_of(dst)) != ("file", "root") or params.third_party:
        return None
    if not posc_honoured(dst):
        return None
    _, verify, expected = checksum_policy(params)
    expected = expected if verify in ("source", "both") else None
    if not relaynative.usable(expected):
        return None
    with bearer(params.tokens, src, dst):       # the URL carries the transfer's token
        prepared = relaynative.Prepared(dst, params, verify in ("destination", "both"),
                                        expected, settings)
    return _Native(i, src, local_path(src), dst, params, expected, prepared)


def _judge(mover: XRootDMover, n: _Native, r: relaynative.Result, began: float,
           ended: float) -> Copied | None:
    """One native upload's result as ``copy`` would end; None: to copy alone (too large,
    or an existing destination to overwrite through a temporary name)."""
    try:
        sent = relaynative.uploaded(r, n.path, n.dst, n.params, n.expected, None)
        if sent is None:
            return None
        # its time: the native copy's, and its checks after the call (no request for a
        # file read back); ``ended`` stays the copy's own, before the next one began
        start = time.monotonic() - (ended - began)
        with bearer(n.params.tokens, n.src, n.dst):
            out = mover.uploaded(n.src, n.dst, n.params, sent, start)
    except TransferError as exc:
        if exc.error_class is ErrorClass.EXISTS and n.params.overwrite:
            return None
        return Copied(None, as_auth(exc, n.params.tokens), began, ended)
    return Copied(out, None, began, ended)


def _alone(mover: XRootDMover, src: str, dst: str, params: TransferParams,
           stop: Cancel | None, t0: float) -> Copied:
    began = time.monotonic() - t0
    if stop is not None and stop.is_set():
        return Copied(None, TransferError(ErrorClass.CANCELLED, NOT_STARTED), began, began)
    out: TransferOutcome | None = None
    err: TransferError | None = None
    try:
        out = mover.copy(src, dst, params=params)
    except TransferError as exc:
        err = exc
    return Copied(out, err, began, time.monotonic() - t0)
