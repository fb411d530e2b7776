"""The ONE integrity path every mover shares (temp name -> copy -> verify size +
zero-padded adler32 -> rename, temp removed on any failure), and the checks around it
(destination exists, checksum policy, space). Metadata operations: ``ops.py``."""
from __future__ import annotations

import contextlib
import threading
import time
from typing import TYPE_CHECKING, TypeVar
from collections.abc import Callable

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import (ProgressFn, TransferOutcome, TransferParams, normalise_adler32,
                                  require_adler32)
from gridxfer.movers.capabilities import capabilities_of
from gridxfer.movers.classify import transfer_error
from gridxfer.movers.names import check_url
from gridxfer.movers.ops import LocalOps, Ops, adler32_file, normal_mode
from gridxfer.movers.urls import local_path, scheme_of, split_dir, temp_url

if TYPE_CHECKING:
    from concurrent.futures import Future

T = TypeVar("T")

def exists(ops: Ops, url: str) -> bool:
    try:
        ops.stat(url)
        return True
    except TransferError as exc:
        if exc.error_class is ErrorClass.SOURCE_MISSING:   # stat classifies ENOENT as "source"
            return False
        raise


# Destination directories this process has already created: one mkdir round trip per
# directory instead of per file (bench.smallfiles). The copy itself still creates
# missing parents (XrdCl mkdir flag, globus-url-copy -cd), so a stale entry is harmless.
_MADE_DIRS: set[str] = set()
_MADE_LOCK = threading.Lock()


def ensure_dir(ops: Ops, url: str) -> None:
    with _MADE_LOCK:
        if url in _MADE_DIRS:
            return
    ops.mkdir(url)
    with _MADE_LOCK:
        if len(_MADE_DIRS) > 100_000:
            _MADE_DIRS.clear()
        _MADE_DIRS.add(url)


def _quiet_unlink(ops: Ops, url: str) -> None:
    with contextlib.suppress(Exception):    # best effort cleanup; the original error wins
        ops.unlink(url)


def _short_of_space(ops: Ops, url: str, missing: int) -> bool:
    """A short copy on a full destination is NO_SPACE (an XRootD TPC reports success)."""
    space = capabilities_of(ops).space
    if space is None or missing <= 0:
        return False
    try:
        free, _total = space(split_dir(url)[0])
    except Exception:  # noqa: BLE001 - no space query here: keep the size error
        return False
    return free < missing


# Source checksums run beside the copy on long-lived threads (a gfal2 context and its
# GridFTP session are per thread, so fresh threads would mean a GSI handshake each time).
_checksum_pool = None
_pool_lock = threading.Lock()


def _pool():
    """The shared checksum threads, made on first use (concurrent.futures pulls in logging:
    ~5 ms of start-up a campaign without temporary names never needs)."""
    global _checksum_pool
    with _pool_lock:
        if _checksum_pool is None:
            from concurrent.futures import ThreadPoolExecutor
            _checksum_pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="gridxfer-cksum")
        return _checksum_pool


def background(fn: Callable[..., T], *args: object) -> Future[T]:
    """``fn(*args)`` on the shared long-lived threads (their gfal2 contexts and sessions
    are reused): a source checksum, a destination check (dstcheck.py)."""
    return _pool().submit(fn, *args)


def _background_checksum(ops: Ops, url: str, stop: Callable[[], bool]) -> Future[str]:
    """adler32 of ``url`` computed concurrently; a local pass stops once ``stop()`` is true."""
    if type(ops) is LocalOps:         # a plain local pass can stop early
        def local() -> str:
            try:
                return adler32_file(local_path(url), stop)
            except OSError as exc:
                raise transfer_error(exc, url) from None
        return background(local)
    return background(ops.checksum, url, "adler32")


def checksum_policy(params: TransferParams) -> tuple[str | None, str, str | None]:
    """(algorithm or None, verify mode, expected adler32 or None) of a transfer."""
    algo = (params.checksum or "").lower() or None
    if algo is not None:
        require_adler32(algo)
    verify = params.verify if algo else "none"
    expected = normalise_adler32(params.expected_checksum) if params.expected_checksum else None
    return algo, verify, expected


def check_destination_sum(dst: str, dst_sum: str, refs: list[tuple[str, str]]) -> None:
    """CHECKSUM error unless ``dst_sum`` equals every (name, value) reference."""
    for name, value in refs:
        if value != dst_sum:
            raise TransferError(ErrorClass.CHECKSUM, f"{dst}: adler32 {dst_sum} != {name} {value}")


# raw copy: (src, tmp_dst, progress) -> (streams_used, mode); raises TransferError.
RawCopy = Callable[[str, str, "ProgressFn | None"], tuple[int, str]]


def destination_exists(dst: str) -> TransferError:
    return TransferError(ErrorClass.EXISTS, f"{dst}: destination exists and overwrite is off")


def verified_copy(src: str, dst: str, params: TransferParams, *, src_ops: Ops, dst_ops: Ops,
                  raw_copy: RawCopy, progress: ProgressFn | None = None,
                  early_release: bool = True, copy_checks_destination: bool = False,
                  mover: str = "") -> TransferOutcome:
    """The integrity path shared by every mover. ``early_release``: signal
    ``params.data_done`` once the bytes are in place, so the scheduler starts the next
    transfer during the verification. A mover whose verification would then need a
    session of its own (GridFTP: a GSI handshake per thread) passes False.
    ``copy_checks_destination``: ``raw_copy`` itself refuses an existing ``dst`` when
    overwrite is off (before it sends more than a first flight: gridxfer's GridFTP client
    asks in the same flight as its STOR), so no stat round trip comes before the copy.
    ``mover``: the name the outcome reports (the mover that ran the copy)."""
    start = time.monotonic()
    check_url(src)          # no tool ever sees a path that leaves its directory
    check_url(dst)
    if params.cancel is not None and params.cancel.is_set():
        raise TransferError(ErrorClass.CANCELLED, f"{src} -> {dst}: cancelled before start")
    entry = src_ops.stat(src)
    if entry.is_dir:
        raise TransferError(ErrorClass.OTHER, f"{src}: source is a directory")
    dst_existed = None if copy_checks_destination else exists(dst_ops, dst)
    if dst_existed and not params.overwrite:
        raise destination_exists(dst)
    _algo, verify, expected = checksum_policy(params)
    src_sum = None
    ensure_dir(dst_ops, split_dir(dst)[0])
    tmp = params.temp_url or temp_url(dst)
    # The source checksum is only needed at the end: it runs WHILE the bytes move (the
    # link is not idle during a local adler32 pass or a server checksum query).
    give_up = threading.Event()
    need_src = verify in ("source", "both") or (verify == "destination" and not expected)
    cancel = params.cancel
    stop = (lambda: give_up.is_set() or cancel.is_set()) if cancel is not None else give_up.is_set
    src_job = _background_checksum(src_ops, src, stop) if need_src else None
    try:
        report = None if progress is None else _sized(progress, entry.size)
        streams_used, mode = raw_copy(src, tmp, report)
        if scheme_of(tmp) == "file":
            normal_mode(local_path(tmp))
        if early_release:
            params.data_done()
        got = dst_ops.stat(tmp).size
        if got != entry.size:
            cls = ErrorClass.NO_SPACE if _short_of_space(dst_ops, dst, entry.size - got) \
                else ErrorClass.CHECKSUM
            raise TransferError(cls, f"{dst}: size {got} != source size {entry.size}")
        if src_job is not None and verify != "destination":
            src_sum = src_job.result()
            if verify == "source" and expected and src_sum != expected:
                raise TransferError(ErrorClass.CHECKSUM,
                                    f"{src}: source adler32 {src_sum} != expected {expected}")
        dst_sum = None
        if verify in ("destination", "both"):
            dst_sum = dst_ops.checksum(tmp, "adler32")
            refs = [(n, v) for n, v in (("source", src_sum), ("expected", expected)) if v]
            if not refs and src_job is not None:
                refs = [("source", src_job.result())]
            check_destination_sum(dst, dst_sum, refs)
        try:
            dst_ops.rename(tmp, dst)
        except TransferError:
            if dst_existed is None:         # not asked before the copy: ask now
                dst_existed = params.overwrite and exists(dst_ops, dst)
            if not dst_existed:
                raise
            dst_ops.unlink(dst)
            dst_ops.rename(tmp, dst)
    except BaseException:
        give_up.set()
        _quiet_unlink(dst_ops, tmp)
        raise
    return TransferOutcome(bytes=entry.size, seconds=time.monotonic() - start,
                           checksum=dst_sum or src_sum or expected, streams_used=streams_used,
                           mode=mode, mover=mover)


def _sized(progress: ProgressFn, size: int) -> ProgressFn:
    """``progress`` with the source size filled in where the copy does not know the total."""
    def report(done: int, total: int | None) -> None:
        progress(done, total or size)
    return report
