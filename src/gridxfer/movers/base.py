"""The Mover seam: one required operation (``copy``) and its routing tables, plus optional
metadata operations whose presence is the mover's capabilities.

A mover copies one file from ``src`` to ``dst`` (URLs) for the scheme pairs it lists
(``pairs``, ``tpc_pairs``); ``gridxfer.movers.registry`` routes by those tables. The
scheduler never branches on the mover class: it asks ``capabilities_of(mover)``
(capabilities.py), which looks at the methods the mover really has.

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
from collections.abc import Callable, Sequence

from gridxfer.errors import TransferError, UsageError


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


# What a mover asks whether its copy is cancelled (``is_set``; ``wait`` where it sleeps).
Cancel = threading.Event | CancelFlag


@dataclass(frozen=True)
class TokenPair:
    """The bearer tokens of one transfer: ``src`` for the source's server, ``dst`` for the
    destination's (an HTTP-TPC sends the remote side's in ``TransferHeaderAuthorization``).
    None: no token for that side (anonymous, or X.509). Neither value is ever shown:
    ``repr`` and ``str`` say only which sides have one."""

    src: str | None = field(default=None, repr=False)
    dst: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return (f"TokenPair(src={'<token>' if self.src else None}, "
                f"dst={'<token>' if self.dst else None})")

    __str__ = __repr__

    def for_side(self, side: str) -> str | None:
        """The token of ``side`` ("source" or "destination")."""
        return self.src if side == "source" else self.dst


@dataclass(frozen=True)
class TransferParams:
    streams: int = 1                        # TCP streams for this transfer
    tcp_buffer: int | None = None           # bytes, per stream, if the protocol allows
    timeout: float = 3600.0                 # seconds for the whole transfer
    checksum: str | None = "adler32"        # None = no checksum
    # the source checksum if already known (lowercase, zero-padded)
    expected_checksum: str | None = None
    verify: str = "both"                    # "source" | "destination" | "both" | "none"
    overwrite: bool = False
    third_party: bool = False               # ask for TPC (both ends must support it)
    cancel: Cancel | None = field(default=None, compare=False)
    # The temporary name to write to (``movers.urls.temp_url`` form), when the caller has
    # journalled it before the call (campaigns: every byte lands under a recorded name);
    # None: the mover picks a random one.
    temp_url: str | None = None
    # Called once when the bytes are in place and only verification is left (size,
    # checksums, rename): the link is free for the next transfer from then on.
    on_data_done: Callable[[], None] | None = field(default=None, compare=False)
    # Bearer tokens for this transfer (davs/https; root:// reads them too where a mover
    # passes them on). Never in repr, logs or argv: movers hand them to the library
    # through its credential API or a child's stdin.
    tokens: TokenPair | None = field(default=None, repr=False, compare=False)
    # The directory URL a file:// source must lie under, symbolic links resolved, checked
    # where the file is opened by a mover with ``copy_many`` (``CopiesMany``; campaigns);
    # None: not asked (the caller checked it, or there is none: ``gridxfer copy``).
    source_base: str | None = None

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
    mover: str = ""                 # the name of the mover that ran the copy (its implementation)

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


Pairs = frozenset[tuple[str, str]]       # (source scheme, destination scheme)


@runtime_checkable
class Mover(Protocol):
    """The required part: a name, the schemes and pairs it copies (the registry's routing
    tables: ``tpc_pairs`` for server-to-server copies), and ``copy``."""

    name: str
    schemes: frozenset[str]
    pairs: Pairs
    tpc_pairs: Pairs

    def copy(self, src: str, dst: str, *, params: TransferParams,
             progress: ProgressFn | None = None) -> TransferOutcome: ...


class RawMover(Mover, Protocol):
    """A mover another mover composes (the spool's legs, the GridFTP route): ``raw_copy``
    moves the bytes only (no verification, no temporary name): (streams used, mode)."""

    def raw_copy(self, src: str, dst: str, params: TransferParams,
                 progress: ProgressFn | None = None) -> tuple[int, str]: ...


# The optional operations. A mover that has the method has the capability.
@runtime_checkable
class Stats(Protocol):
    def stat(self, url: str) -> Entry: ...


@runtime_checkable
class Lists(Protocol):
    def listdir(self, url: str) -> list[Entry]: ...


@runtime_checkable
class Checksums(Protocol):
    def checksum(self, url: str, algorithm: str = "adler32") -> str: ...


@runtime_checkable
class Unlinks(Protocol):
    def unlink(self, url: str) -> None: ...


@runtime_checkable
class MakesDirs(Protocol):
    def mkdir(self, url: str) -> None: ...


@runtime_checkable
class HasSpace(Protocol):
    def space(self, url: str) -> tuple[int, int]: ...       # (free_bytes, total_bytes)


@runtime_checkable
class Connects(Protocol):
    """Start a session to ``url``'s server and return at once (best effort: a failure is
    the first request's to report), so the first copy does not wait for the login."""

    def connect(self, url: str) -> None: ...


NOT_STARTED = "cancelled before it started"     # a copy a stop ended before it began


@dataclass(frozen=True)
class Copied:
    """One copy of ``copy_many``: its outcome or its error, and when it began and ended
    (seconds from the call's start)."""
    outcome: TransferOutcome | None
    error: TransferError | None
    started: float
    ended: float


@runtime_checkable
class CopiesMany(Protocol):
    """Copies one after the other in one call (a worker's bundle of small files): one
    ``Copied`` per ``(src, dst, params)``, in order; one copy's failure is its ``error``,
    never raised. Once ``stop`` is set the copies not yet begun end CANCELLED
    (``NOT_STARTED``). A mover with this operation also confines its local sources
    (``TransferParams.source_base``) where it opens them, in ``copy`` as in ``copy_many``."""

    def copy_many(self, jobs: Sequence[tuple[str, str, TransferParams]],
                  stop: Cancel | None = None) -> list[Copied]: ...


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
