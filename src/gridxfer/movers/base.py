"""The Mover seam: one small required operation plus declared capabilities.

A mover copies one file from ``src`` to ``dst`` (URLs). It registers itself by URL
scheme in ``gridxfer.movers.registry``. The scheduler never branches on the mover
class; it reads ``capabilities``.

Integrity contract for every mover (ARCHITECTURE.md): data is written under a
temporary name (or XRootD POSC), size and zero-padded adler32 are verified, and only
then is it renamed into place. On any failure the partial file is removed. Failures
raise ``gridxfer.errors.TransferError`` with an ``ErrorClass`` decided where the
error is first understood.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable
from collections.abc import Callable

from gridxfer.errors import UsageError


class CancelFlag:
    """A one-way cancel flag with ``threading.Event``'s interface (``set``, ``is_set``,
    ``wait``) for one transfer. The scheduler makes one per dispatched attempt: an Event
    builds a Condition and two locks (1.4 us) where this is a bool (0.07 us), and movers
    only ever ask ``is_set()``. ``wait()`` builds a real Event on first use."""

    __slots__ = ("_flag", "_event")
    _make_lock = threading.Lock()

    def __init__(self) -> None:
        self._flag = False
        self._event: threading.Event | None = None

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        self._flag = True
        event = self._event
        if event is not None:
            event.set()

    def wait(self, timeout: float | None = None) -> bool:
        if self._flag:
            return True
        with CancelFlag._make_lock:
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        if self._flag:          # set() ran before it could see the new Event
            event.set()
        return event.wait(timeout)


@dataclass(frozen=True)
class Capabilities:
    checksum: bool = False          # can compute a remote checksum (adler32)
    third_party: bool = False       # server-to-server copy; no data through this host
    stat: bool = False              # size of a remote file
    listdir: bool = False           # directory listing with sizes (for dataset expansion)
    mkdir: bool = False
    unlink: bool = False
    space: bool = False             # free space query on a destination
    streams: bool = False           # honours TransferParams.streams


@dataclass(frozen=True)
class TransferParams:
    streams: int = 1                        # TCP streams for this transfer
    tcp_buffer: int | None = None           # bytes, per stream, if the protocol allows
    timeout: float = 3600.0                 # seconds for the whole transfer
    checksum: str | None = "adler32"        # None = no checksum
    expected_checksum: str | None = None    # source checksum if already known (lowercase, zero-padded)
    verify: str = "both"                    # "source" | "destination" | "both" | "none"
    overwrite: bool = False
    third_party: bool = False               # ask for TPC (both ends must support it)
    cancel: threading.Event | CancelFlag | None = field(default=None, compare=False)
    # The temporary name to write to (``movers.urls.temp_url`` form), when the caller has
    # journalled it before the call (campaigns: every byte lands under a recorded name);
    # None: the mover picks a random one.
    temp_url: str | None = None
    # Called once when the bytes are in place and only verification is left (size,
    # checksums, rename): the link is free for the next transfer from then on.
    on_data_done: Callable[[], None] | None = field(default=None, compare=False)

    def data_done(self) -> None:
        if self.on_data_done is not None:
            self.on_data_done()


@dataclass(frozen=True)
class TransferOutcome:
    bytes: int
    seconds: float
    checksum: str | None            # verified destination checksum (8 lowercase hex for adler32)
    streams_used: int               # streams actually used (not just asked for)
    mode: str                       # e.g. "gfal-streamed", "gfal-tpc", "xrdcl", "globus-url-copy"

    @property
    def rate(self) -> float:
        return self.bytes / self.seconds if self.seconds > 0 else 0.0


# progress(bytes_done, bytes_total_or_None); called from the copying thread.
ProgressFn = Callable[[int, "int | None"], None]


@dataclass(frozen=True)
class Entry:
    url: str
    size: int
    is_dir: bool = False
    pending: bool = False           # XRootD POSC file still being written (not complete)


@runtime_checkable
class Mover(Protocol):
    name: str
    schemes: frozenset[str]
    capabilities: Capabilities

    def copy(self, src: str, dst: str, *, params: TransferParams,
             progress: ProgressFn | None = None) -> TransferOutcome: ...

    # Optional operations; present when the matching capability is True.
    # def stat(self, url: str) -> Entry
    # def listdir(self, url: str) -> list[Entry]
    # def checksum(self, url: str, algorithm: str = "adler32") -> str
    # def unlink(self, url: str) -> None
    # def mkdir(self, url: str) -> None
    # def space(self, url: str) -> tuple[int, int]   # (free_bytes, total_bytes)


def require_adler32(algorithm: str) -> None:
    """Every mover's remote checksum is adler32 (the one the integrity path compares)."""
    if algorithm.lower() != "adler32":
        raise UsageError(f"unsupported checksum algorithm: {algorithm}")


def normalise_adler32(value: str | int) -> str:
    """adler32 as 8 lowercase hex digits, zero-padded (the field pitfall)."""
    if isinstance(value, int):
        return f"{value & 0xFFFFFFFF:08x}"
    text = value.strip().lower()
    if text.startswith("0x"):
        text = text[2:]
    return text.zfill(8)
