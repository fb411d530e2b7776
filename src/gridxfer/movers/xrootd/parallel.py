"""Parallel XRootD download: N channels, one TCP connection each, N reader threads.

Used by the XRootD mover for root -> file (see xrootd.py for why not substreams).
"""
from __future__ import annotations

import os
import threading
import time

from gridxfer.movers.xrootd.env import client as xrd
from XRootD.client.flags import OpenFlags

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import ProgressFn, TransferParams
from gridxfer.movers.classify import transfer_error
from gridxfer.movers.urls import with_user
from gridxfer.movers.xrootd.authz import xurl

CHUNK = 8 << 20
READ_TIMEOUT = 60


class _Slots:
    """Small integers held by running transfers (the login-name slot of their channels)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._used: set[int] = set()

    def acquire(self) -> int:
        with self._lock:
            slot = next(i for i in range(len(self._used) + 1) if i not in self._used)
            self._used.add(slot)
            return slot

    def release(self, slot: int) -> None:
        with self._lock:
            self._used.discard(slot)


_SLOTS = _Slots()


class _Job:
    def __init__(self, size: int, params: TransferParams, progress: ProgressFn | None) -> None:
        self.size, self.params, self.progress = size, params, progress
        self.lock = threading.Lock()
        self.next_offset = 0
        self.done = 0
        self.error: TransferError | None = None
        self.deadline = time.monotonic() + params.timeout

    def take(self) -> int | None:
        with self.lock:
            if self.error is not None or self.next_offset >= self.size:
                return None
            if self.params.cancel is not None and self.params.cancel.is_set():
                self.error = TransferError(ErrorClass.CANCELLED, "cancelled")
                return None
            if time.monotonic() > self.deadline:
                self.error = TransferError(ErrorClass.TIMEOUT,
                                           f"not finished within {self.params.timeout:g} s")
                return None
            offset, self.next_offset = self.next_offset, self.next_offset + CHUNK
            return offset

    def fail(self, error: TransferError) -> None:
        with self.lock:
            if self.error is None:
                self.error = error

    def add(self, n: int) -> None:
        with self.lock:
            self.done += n
            done = self.done
        if self.progress:
            self.progress(done, self.size)


def _reader(handle: xrd.File, fd: int, job: _Job, url: str) -> None:
    try:
        while (offset := job.take()) is not None:
            left = max(1, int(job.deadline - time.monotonic()))
            status, data = handle.read(offset, min(CHUNK, job.size - offset),
                                       timeout=min(READ_TIMEOUT, left))
            if not status.ok:
                job.fail(transfer_error(status, url))
                return
            if not data and offset < job.size:
                job.fail(TransferError(ErrorClass.OTHER, f"{url}: short read at {offset}"))
                return
            os.pwrite(fd, data, offset)
            job.add(len(data))
    except OSError as exc:
        job.fail(transfer_error(exc, url, side="destination"))


def parallel_download(src: str, path: str, streams: int, params: TransferParams,
                      progress: ProgressFn | None) -> int:
    """Read ``src`` into the new local file ``path`` over ``streams`` connections."""
    slot = _SLOTS.acquire()
    handles: list[xrd.File] = []
    fd = -1
    try:
        for i in range(streams):
            handle = xrd.File()
            status, _ = handle.open(xurl(with_user(src, f"gx{slot}p{i}")), OpenFlags.READ,
                                    timeout=READ_TIMEOUT)
            if not status.ok:
                raise transfer_error(status, src)
            handles.append(handle)
        status, info = handles[0].stat()
        if not status.ok:
            raise transfer_error(status, src)
        job = _Job(int(info.size), params, progress)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        threads = [threading.Thread(target=_reader, args=(h, fd, job, src), daemon=True,
                                    name=f"xrd-read-{i}") for i, h in enumerate(handles)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if job.error is not None:
            reason = str(job.error).split(": ", 1)[-1]
            raise TransferError(job.error.error_class, f"{src} -> {path}: {reason}")
        return streams
    finally:
        if fd >= 0:
            os.close(fd)
        for handle in handles:
            handle.close(timeout=READ_TIMEOUT)
        _SLOTS.release(slot)
