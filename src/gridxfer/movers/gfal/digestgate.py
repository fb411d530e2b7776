"""At most ``GRIDXFER_HTTP_DIGEST_SLOTS`` checksum requests (``Want-Digest``) in flight at
once per HTTP server, as root's checksum queries have ``GRIDXFER_XRD_CHECKSUM_SLOTS``.

Why: XrdHttp answers a digest through xrootd's checksum jobs (``XrdXrootdJob``: at most
``xrootd.chksum max`` running, 4 by default, and a table of 3 x max jobs, running or
queued). Past the table the request gets ``kXR_wait 30``, and XrdHttp's bridge holds the
HTTP answer for those 30 s (``XrdXrootdJob::Schedule``, ``XrdXrootdTransit::Wait``,
v5.5.3). A campaign of 1 MB files with adler32 at 32 transfers sent 32 digests at once:
200 files over the 20 ms link took 33.3 s against 3.0 s without checksums (session 37,
docs/performance-notes.md). Keeping this process's digests to a server below the jobs it
runs at once keeps them out of that queue.

Every digest this package asks goes through ``held``: ``davhead.head`` with ``digest`` (a
davs destination up to ``davs.SMALL``) and ``HttpOps.checksum`` (gfal2's, any size).
Files up to 64 KiB are read back instead (``davhead.read_back``) and davs sources up to
``davs.SMALL`` are checksummed from the bytes the copy read (``davput.Fetched``): neither
asks a digest.
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit

from gridxfer import envsettings
from gridxfer.errors import ErrorClass, TransferError

DEFAULT_SLOTS = int(envsettings.SETTINGS["GRIDXFER_HTTP_DIGEST_SLOTS"].default)
WAIT = 600.0                        # s: longest wait for a slot before the copy is a TIMEOUT

_lock = threading.Lock()
_gates: dict[str, threading.BoundedSemaphore] = {}


def slots() -> int:
    """``GRIDXFER_HTTP_DIGEST_SLOTS`` (at least 1; a value that is not a number: the default),
    read when a server's gate is first made."""
    return envsettings.count("GRIDXFER_HTTP_DIGEST_SLOTS")


def _server(url: str) -> str:
    """host[:port] of ``url`` as written, without a user."""
    return urlsplit(url).netloc.rpartition("@")[2]


def _gate(url: str) -> threading.BoundedSemaphore:
    server = _server(url).lower()       # davs:// and https:// to it: one gate
    with _lock:
        gate = _gates.get(server)
        if gate is None:
            gate = _gates[server] = threading.BoundedSemaphore(slots())
        return gate


@contextlib.contextmanager
def held(url: str, wait: float = WAIT) -> Iterator[None]:
    """One of ``url``'s server's digest slots for the ``with`` block; a TIMEOUT if none came
    free within ``wait`` seconds (the digests before it did not end)."""
    gate = _gate(url)
    if not gate.acquire(timeout=wait):
        raise TransferError(ErrorClass.TIMEOUT,
                            f"{_server(url)}: no checksum slot "
                            f"came free in {wait:.0f} s ({slots()} at once per server)")
    try:
        yield
    finally:
        gate.release()


def reset() -> None:
    """Forget every server's gate (tests: a new ``GRIDXFER_HTTP_DIGEST_SLOTS``)."""
    with _lock:
        _gates.clear()


__all__ = ["DEFAULT_SLOTS", "WAIT", "held", "reset", "slots"]
