"""A small file's bytes over this thread's ``davsession`` (up to ``davs.SMALL``): the
source read whole (a local file, or one ``GET`` of a davs/https source) and one ``PUT``
of the temporary name, on connections kept from one file to the next.

Why own code (docs/performance-notes.md, "Small files over davs://", session 36): gfal2's
streamed copy of a 4 KB file made davix load the X.509 proxy again for the GET and for
the PUT, started a watcher thread, sent the PUT with ``Expect: 100-continue`` (a round
trip before the body) and then closed the PUT's connection, so every next file paid a
TCP and a TLS handshake: ~29 ms of this host's CPU and 4 round trips a file on the WAN,
where this sends one request.

Only plain answers are taken: a GET's ``200`` with the whole body, a PUT's ``200``,
``201`` or ``204``. Anything else (a redirect, a refusal, a server error, a dropped
connection) is None and the copy goes through gfal2 as before (its PUT replaces the
temporary name), whose redirects, retries and error classes stay the one behaviour. A
timeout is a TIMEOUT (asking gfal2 again would wait as long once more), and a cancelled
copy is CANCELLED before anything is sent. Tokens go in a header (``davsession.auth``),
never in a URL, a log or an error.
"""
from __future__ import annotations

import threading

from gridxfer import envsettings
from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.adler import adler32
from gridxfer.movers.base import (Entry, TokenPair, TransferParams, normalise_adler32,
                                  require_adler32)
from gridxfer.movers.ops import Ops, StatOnce
from gridxfer.movers.gfal import davsession
from gridxfer.movers.urls import local_path, scheme_of

CONNECT_TIMEOUT = 30.0              # s; the answer's: GRIDXFER_HTTP_STALL_TIMEOUT
MODE = "davs-put"                   # TransferOutcome.mode of a copy sent here


def copy(src: str, tmp: str, params: TransferParams, size: int, source: object, *,
         stall: float) -> bool:
    """``src`` (file://, davs://, https://; ``size`` bytes, at most ``davs.SMALL``) PUT to
    ``tmp``; its bytes those ``source`` holds where it is ``Fetched``. False: not sent here
    (ask gfal2). Raises TIMEOUT on a stall of ``stall`` seconds, CANCELLED when the copy is
    cancelled first."""
    if params.cancel is not None and params.cancel.is_set():
        raise TransferError(ErrorClass.CANCELLED, f"{src} -> {tmp}: cancelled")
    tokens = params.tokens or TokenPair()
    if isinstance(source, Fetched) and source.entry.url == src:
        data = source.data(stall)
    else:
        data = read(src, tokens.src, size, stall)
    return data is not None and put(tmp, data, tokens.dst, stall)


class Fetched(StatOnce):
    """A small davs/https source (at most ``davs.SMALL``) read whole once, by the copy or
    by the source's checksum, whichever asks first: its adler32 is that of the bytes the
    server sent (root's relay does the same), so no checksum job runs on the source server
    (``digestgate``: XrdHttp holds a digest past its job table for 30 s) and its bytes
    cross the link once. Where the GET is not answered plainly the copy and the checksum
    go to gfal2 as before."""

    def __init__(self, ops: Ops, entry: Entry, token: str | None) -> None:
        super().__init__(ops, entry)
        self._token = token
        self._lock = threading.Lock()
        self._read = False
        self._data: bytes | None = None

    def data(self, stall: float | None = None) -> bytes | None:
        with self._lock:
            if not self._read:
                self._data = read(self.entry.url, self._token, self.entry.size,
                                  stall_timeout() if stall is None else stall)
                self._read = True
            return self._data

    def checksum(self, url: str, algorithm: str = "adler32") -> str:
        require_adler32(algorithm)
        data = self.data() if url == self.entry.url else None
        if data is None:
            return super().checksum(url, algorithm)
        return normalise_adler32(adler32(data))


def read(url: str, token: str | None, size: int, stall: float) -> bytes | None:
    """The bytes of a local file or of one GET (at most ``size`` + 1: a file that grew is
    copied as it is now and refused by the size check); None: not read here."""
    scheme = scheme_of(url)
    if scheme == "file":
        try:
            with open(local_path(url), "rb") as f:
                return f.read(size + 1)
        except OSError:
            return None         # gfal2 classifies it (ENOENT: the source is missing)
    if scheme not in davsession.HTTP_SCHEME:
        return None
    headers = {**davsession.auth(url, token), "Accept-Encoding": "identity"}
    answer = _send("GET", url, headers, None, stall)
    return None if answer is None else answer.whole()


def put(url: str, data: bytes, token: str | None, stall: float) -> bool:
    """One PUT of ``data`` to ``url`` (no ``Expect: 100-continue``: the body follows the
    headers); False where the server did not take it."""
    headers = {**davsession.auth(url, token), "Content-Type": "application/octet-stream"}
    answer = _send("PUT", url, headers, data, stall)
    return answer is not None and answer.status in (200, 201, 204)


def _send(method: str, url: str, headers: dict, body: bytes | None,
          stall: float) -> davsession.Answer | None:
    try:
        return davsession.request(method, url, headers, body=body,
                                  timeout=(CONNECT_TIMEOUT, stall))
    except davsession.Stalled:
        raise TransferError(ErrorClass.TIMEOUT,
                            f"{url}: {method} had no answer in {stall:.0f} s") from None
    except davsession.NoAnswer:
        return None


def stall_timeout() -> float:
    """Seconds without an answer (a small file's GET or PUT) or without marker progress
    (an HTTP-TPC) before the copy is a stall: ``GRIDXFER_HTTP_STALL_TIMEOUT``, read at
    each copy."""
    return envsettings.value("GRIDXFER_HTTP_STALL_TIMEOUT")


__all__ = ["CONNECT_TIMEOUT", "MODE", "Fetched", "copy", "put", "read", "stall_timeout"]
