"""HTTP third-party copy (WebDAV ``COPY``) between two davs/https servers, by gfal2's HTTP
plugin in the gfal2 child process (agent.py), never through this host.

Pull (``COPY`` to the destination with ``Source:``) first; push (``COPY`` to the source with
``Destination:``) where pull is refused (an XrdHttp source without a token for it answers
the pull's delegation with 400, for example), and then push straight away for that pair of
servers. Each side's token authorises that side: gfal2 sends the active server's in
``Authorization`` and the remote server's in ``TransferHeaderAuthorization``. The tokens
go to the child on its stdin.

Progress comes from the servers' performance markers (XrdHttpTPC: one every 5 s), and
they drive the stall watchdog: no marker progress for ``GRIDXFER_HTTP_STALL_TIMEOUT``
seconds (default 120; keep it above the markers' interval) kills the copy, which fails as
TIMEOUT and is retried by the scheduler (xrootd#1303: a TPC that stays near 0 B/s until a
long timeout). XrdHttp 5.5.3 answers 201 before it copies and reports a failure only in
the body, where it leaves an empty destination file: gfal2 reads the body, and the
integrity path deletes the temporary name.
"""
from __future__ import annotations

import contextlib
import os
import threading
from urllib.parse import urlsplit

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import ProgressFn, TokenPair, TransferParams
from gridxfer.movers.gfal import agent
from gridxfer.movers.gfal.davput import stall_timeout
from gridxfer.movers.ops import Ops

PULL, PUSH = "3rd pull", "3rd push"
# a pull that fails with one of these says nothing about whether push would work
_FINAL = frozenset({ErrorClass.AUTH, ErrorClass.SOURCE_MISSING, ErrorClass.EXISTS,
                    ErrorClass.CANCELLED, ErrorClass.TIMEOUT, ErrorClass.NO_SPACE,
                    ErrorClass.BAD_NAME})
_push_only: set[tuple[str, str]] = set()        # (source server, destination server)
_lock = threading.Lock()


def _creds(src: str, dst: str, tokens: TokenPair) -> list[list[str]]:
    out = []
    for url, token in ((src, tokens.src), (dst, tokens.dst)):
        if token:
            parts = urlsplit(url)
            out.append([f"{parts.scheme}://{parts.netloc}/", token])
    return out


def modes(src: str, dst: str) -> list[str]:
    """The modes to try, in order, for this pair of servers: ``GRIDXFER_HTTP_TPC_MODE``
    ``pull`` or ``push`` forces one (read at each copy); ``auto`` (the default) pulls, and
    pushes where pull was refused."""
    forced = os.environ.get("GRIDXFER_HTTP_TPC_MODE", "auto").strip().lower()
    if forced in ("pull", "push"):
        return [PULL if forced == "pull" else PUSH]
    key = (urlsplit(src).netloc, urlsplit(dst).netloc)
    with _lock:
        return [PUSH] if key in _push_only else [PULL, PUSH]


def copy(src: str, tmp: str, params: TransferParams, progress: ProgressFn | None,
         dst_ops: Ops) -> tuple[int, str]:
    """HTTP-TPC ``src`` -> ``tmp``: (streams used, mode: "http-tpc-pull" or "-push")."""
    tokens = params.tokens or TokenPair()
    creds = _creds(src, tmp, tokens)
    tried = modes(src, tmp)
    for i, mode in enumerate(tried):
        try:
            agent.copy(src, tmp, params, progress, 1, http={"mode": mode, "creds": creds},
                       stall=stall_timeout())
        except TransferError as exc:
            if mode != PULL or i + 1 == len(tried) or exc.error_class in _FINAL:
                raise
            with contextlib.suppress(TransferError):     # the empty file a failed pull left
                dst_ops.unlink(tmp)
            continue
        if mode == PUSH and PULL in tried:
            with _lock:
                _push_only.add((urlsplit(src).netloc, urlsplit(tmp).netloc))
        return 1, "http-tpc-" + mode.split()[1]
    raise AssertionError("unreachable")
