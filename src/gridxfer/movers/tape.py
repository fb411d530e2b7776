"""The tape seam: where a file is (disk, tape, both), staging and archive monitoring, in BULK.

A tape-backed storage endpoint answers, per file, one ``Residency``:

- ``DISK_ONLY``: on disk, not (yet) on tape (written, migration pending);
- ``ON_TAPE``: on disk AND on tape (migrated, still online: FTS3's "archived");
- ``TAPE_ONLY``: on tape only, offline (purged from disk): needs ``bring_online``;
- ``MISSING``: the storage has no such file;
- ``ERROR``: the storage answered with an error for this file (``TapeState.error``).

``TapeOps`` is the optional capability a mover has when its protocol can ask (root://
through XRootD's ``query prepare`` and ``prepare``: ``movers.xrootd.tape``). Whether an
ENDPOINT is tape-backed is the inventory's / spec's business, not the mover's.

Every operation is BULK: one request to the storage for up to ``MAX_BULK`` files (FTS3
polls archive and staging state 200 files at a time), never one request per file. A
protocol whose server takes fewer per request (xrootd's prepare plugin: ``-maxfiles``)
splits inside the implementation; callers pass any number and use ``batches`` to size
their own polls.

For campaigns (h19-camp): ask ``capabilities_of(mover_for(url)).tape`` (None: the protocol cannot
ask). Archive: after copy + checksum, poll ``tape.archive_status(urls)`` until
``state.on_tape``. Staging: ``rid = tape.bring_online(urls, pin_lifetime_s, timeout_s)``,
then poll ``tape.stage_status(urls, rid)`` until ``state.online``; ``tape.release(urls,
rid)`` (``Releases``) unpins when done. Errors of the whole request raise
``TransferError`` (classified as usual); per-file errors come back as ``Residency.ERROR``.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable

MAX_BULK = 200          # files per status or stage request (FTS3's bulk size)


class Residency(StrEnum):
    DISK_ONLY = "disk_only"
    ON_TAPE = "on_tape"
    TAPE_ONLY = "tape_only"
    MISSING = "missing"
    ERROR = "error"


@dataclass(frozen=True)
class TapeState:
    """One file's answer. ``requested``: a stage request is pending for it (recall queued
    or running). ``error``: the storage's text for ``Residency.ERROR`` (else empty)."""

    url: str
    residency: Residency
    requested: bool = False
    error: str = ""

    @property
    def on_tape(self) -> bool:
        return self.residency in (Residency.ON_TAPE, Residency.TAPE_ONLY)

    @property
    def online(self) -> bool:
        return self.residency in (Residency.DISK_ONLY, Residency.ON_TAPE)


@runtime_checkable
class TapeOps(Protocol):
    """Bulk tape operations (see the module docstring). Every method takes a sequence of
    URLs of ONE storage endpoint and returns an answer for each of them."""

    def archive_status(self, urls: Sequence[str]) -> dict[str, TapeState]: ...

    def bring_online(self, urls: Sequence[str], pin_lifetime_s: float,
                     timeout_s: float) -> str: ...

    def stage_status(self, urls: Sequence[str],
                     request_id: str | None = None) -> dict[str, TapeState]: ...


@runtime_checkable
class Releases(Protocol):
    """Optional: unpin / evict the disk copies of staged files (XRootD ``prepare -e``)."""

    def release(self, urls: Sequence[str], request_id: str | None = None) -> None: ...


def batches(urls: Sequence[str], size: int = MAX_BULK) -> Iterator[list[str]]:
    """``urls`` in consecutive lists of at most ``size`` (the bulk request size)."""
    if size < 1:
        raise ValueError("batch size must be >= 1")
    for i in range(0, len(urls), size):
        yield list(urls[i:i + size])
