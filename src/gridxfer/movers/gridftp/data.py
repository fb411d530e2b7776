"""The data connections of gridxfer's GridFTP client (movers/gridftp/client.py): one per
upload, MODE S, the file sent with ``sendfile``.

* ``send_ahead``: the new connection's first flight leaves before the server's 150 reply.
* ``send_file``: the rest, in CHUNK pieces (cancel, deadline and progress between them).
* ``keep`` / ``take``: a connection opened (PASV, connect) right after an upload, for the
  thread's next STOR to the same server. ``take`` hands it out only while it is recent and
  the server has not closed it; otherwise the caller sends PASV as usual.
"""
from __future__ import annotations

import errno
import os
import select
import socket
import threading
import time

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import ProgressFn, TransferParams

CHUNK = 8 << 20                   # bytes per sendfile call: the cancel/progress granularity
AHEAD = 4 << 20                   # at most this much is sent before the server's 150 reply
DATA_STALL = 120.0                # s without any byte accepted by the data socket
CONNECT_WAIT = 30.0               # s a prepared connection still connecting is waited for
READY_MAX_AGE = 20.0              # s a prepared data connection is used for (then: PASV again)
_local = threading.local()


def connect(address: tuple[str, int]) -> socket.socket:
    return socket.create_connection(address, timeout=DATA_STALL)


def connect_later(address: tuple[str, int]) -> socket.socket:
    """A socket whose connect to ``address`` is under way (non-blocking): the handshake
    runs while the caller does other things; ``take`` waits for it."""
    data = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    data.setblocking(False)
    err = data.connect_ex(address)
    if err not in (0, errno.EINPROGRESS):
        data.close()
        raise OSError(err, f"connect to {address[0]}:{address[1]}: {os.strerror(err)}")
    return data


def send_ahead(data: socket.socket, fh, size: int) -> int:
    """What the connection takes without waiting (its first flight: ~10 segments, or a
    prepared connection's buffer), sent before the 150 reply comes back: the bytes are on
    the way one round trip sooner. Never blocks, so a STOR the server refuses cannot
    stall here; its reply is read next and the connection dropped."""
    data.setblocking(False)
    try:
        return os.sendfile(data.fileno(), fh.fileno(), 0, min(size, AHEAD))
    except (BlockingIOError, InterruptedError):
        return 0
    finally:
        data.settimeout(DATA_STALL)


def send_file(data: socket.socket, fh, size: int, params: TransferParams,
              progress: ProgressFn | None, deadline: float, sent: int = 0) -> int:
    """Send ``fh`` from byte ``sent`` to ``size``; the bytes sent in all."""
    while sent < size:
        if params.cancel is not None and params.cancel.is_set():
            raise TransferError(ErrorClass.CANCELLED, "cancelled during the upload")
        if time.monotonic() > deadline:
            raise TransferError(ErrorClass.TIMEOUT, f"not finished within {params.timeout:g} s")
        n = data.sendfile(fh, sent, min(CHUNK, size - sent))
        if n == 0:
            raise TransferError(ErrorClass.OTHER, f"source shrank: {sent} of {size} bytes sent")
        sent += n
        if progress is not None:
            progress(sent, size)
    return sent


# -- connections prepared for the thread's next upload --------------------------------
def prepared() -> dict[str, tuple[socket.socket, float]]:
    """This thread's prepared data connections, by server (host:port), with their age."""
    ready = getattr(_local, "ready", None)
    if ready is None:
        ready = _local.ready = {}
    return ready


def keep(netloc: str, data: socket.socket) -> None:
    discard(netloc)
    prepared()[netloc] = (data, time.monotonic())


def discard(netloc: str) -> None:
    old = prepared().pop(netloc, None)
    if old is not None:
        old[0].close()


def take(netloc: str) -> socket.socket | None:
    """The prepared connection to ``netloc`` (its connect finished first) if it is recent
    and the server has not closed it (closed, refused, or anything to read on it: not
    used, and closed here)."""
    ready = prepared().pop(netloc, None)
    if ready is None:
        return None
    data, since = ready
    try:
        _, writable, _ = select.select([], [data], [], CONNECT_WAIT)
        if (writable and not data.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                and time.monotonic() - since <= READY_MAX_AGE):
            data.setblocking(False)
            try:
                data.recv(1, socket.MSG_PEEK)       # b'': closed; data: not ours to send on
            except BlockingIOError:
                data.settimeout(DATA_STALL)
                return data                         # open and quiet: usable
    except OSError:
        pass
    data.close()
    return None
