"""gfal2 mover for gsiftp / ftp / root / file.

One gfal2 context per thread (contexts are not thread-safe). Streams: gfal2 honours
``nbstreams`` only for native GridFTP copies (gsiftp/ftp -> gsiftp/ftp, which are
server-to-server); file<->gsiftp is a single-stream "streamed" copy and root://
ignores nbstreams. The registry therefore routes those pairs to the XRootD and
globus-url-copy movers; this mover reports the streams it really used.
"""
from __future__ import annotations

import re
import signal
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import gfal2

from gridxfer.errors import ErrorClass, TransferError, UsageError
from gridxfer.movers import routes
from gridxfer.movers.gfal import agent as gfalagent
from gridxfer.movers.gfal import meta
from gridxfer.movers.base import (Entry, ProgressFn, TransferOutcome,
                                  TransferParams, require_adler32)
from gridxfer.movers.classify import transfer_error
from gridxfer.movers.integrity import verified_copy
from gridxfer.movers import toolurls
from gridxfer.movers.urls import scheme_of

_g = toolurls.gfal_url     # root:// as gfal2 reads it (it decodes %XX; XrdCl does not)

GRIDFTP = routes.GRIDFTP
NO_SPACE_RETRY = 120.0                              # s before a failed space query is retried
_NO_SPACE: dict[str, tuple[float, str]] = {}        # server -> (retry after, error)
_NO_SPACE_LOCK = threading.Lock()
_local = threading.local()
R = TypeVar("R")


def new_context() -> gfal2.Gfal2Context:
    """A gfal2 context that leaves this thread's signal mask as it was.

    The first ``creat_context()`` of a process (globus module activation) blocks nearly
    every signal, SIGINT/SIGTERM/SIGALRM included, in the calling thread. Every child
    started from that thread afterwards inherits the mask: xrootd/gridftp servers that
    ignore SIGTERM, Nagios plugins whose ``-t`` alarm never fires, and a campaign that
    Ctrl-C cannot stop.

    gfal2 logs at ``verbose_level.normal`` (warnings), not its default, which hands every
    copy's events to Python: gfal2-python decodes each message strictly, and an event
    cut inside a UTF-8 sequence ('Event triggered: ... LIST:ITEM <src> => <dst>', cut
    short for a long non-ASCII name: 'ä' * 127 + 'x' in a deep directory) failed the copy
    with SystemError. Nothing showed those messages (only the ``gridxfer`` logger has
    handlers).
    """
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    try:
        gfal2.set_verbose(gfal2.verbose_level.normal)
        return gfal2.creat_context()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def context(url: str | None = None) -> gfal2.Gfal2Context:
    """This thread's gfal2 context for metadata on ``url``'s server (or for copies).

    gfal2 keeps reusable GridFTP sessions per context, but in practice only for one
    server, and not after a server-to-server filecopy: so each thread has one context per
    server (metadata and streamed copies to or from it) and one more for third-party
    copies. A GSI handshake costs 0.5-3 s; reuse costs ~10 ms.
    """
    key = _key(url)
    cache = getattr(_local, "contexts", None)
    if cache is None:
        cache = _local.contexts = {}
    ctx = cache.get(key)
    if ctx is None:
        ctx = new_context()
        ctx.set_opt_boolean("GRIDFTP PLUGIN", "SESSION_REUSE", True)
        cache[key] = ctx
    return ctx


def _key(url: str | None) -> str:
    return urlsplit(url).netloc if url else "<copy>"


# What a request on a GridFTP session the server has closed meets: globus-gridftp-server
# closes a control connection idle past its -control-idle-timeout (600 s by default) with
# "421 Idle Timeout", and gfal2 (SESSION_REUSE) still sends the next request on it.
_CLOSED_SESSION = re.compile(r"error 421\b|connection reset by peer|broken pipe", re.I)


def on_server(url: str, ask: Callable[[gfal2.Gfal2Context], R]) -> R:
    """``ask(context(url))``; once more on a new session when the reused one had been
    closed by the server (``_CLOSED_SESSION``: its idle timeout). For requests that may be
    asked twice (stat, listing, checksum, mkdir): the first never reached the server."""
    try:
        return ask(context(url))
    except (gfal2.GError, TransferError) as exc:
        if not _CLOSED_SESSION.search(str(exc)):
            raise
    getattr(_local, "contexts", {}).pop(_key(url), None)
    return ask(context(url))


def copy_parameters(ctx: gfal2.Gfal2Context, *, timeout: float, nbstreams: int,
                    tcp_buffer: int | None, progress: ProgressFn | None):
    """The transfer parameters of every gfal2 copy gridxfer makes, in this process or in
    gfalagent.py's child: bytes only (``strict_copy``: size and checksums are verified once,
    by ``verified_copy``), to a name that may be replaced, parents created."""
    tp = ctx.transfer_parameters()
    tp.overwrite = True
    tp.create_parent = True
    tp.timeout = max(1, int(timeout))
    tp.nbstreams = nbstreams
    if tcp_buffer:
        tp.tcp_buffersize = int(tcp_buffer)
    tp.strict_copy = True
    if progress is not None:
        def monitor(src_, dst_, average, instant, transferred, elapsed):  # noqa: ARG001
            progress(int(transferred), None)
        tp.monitor_callback = monitor
    return tp


def _native(pair: tuple[str, str]) -> bool:
    return pair[0] in GRIDFTP and pair[1] in GRIDFTP


class GfalMover:
    name = "gfal2"
    schemes, pairs, tpc_pairs = routes.GFAL.schemes, routes.GFAL.pairs, routes.GFAL.tpc_pairs

    # -- metadata ---------------------------------------------------------------
    def stat(self, url: str) -> Entry:
        return on_server(url, lambda ctx: meta.stat_entry(ctx, url, _g(url)))

    def listdir(self, url: str) -> list[Entry]:
        return on_server(url, lambda ctx: meta.list_entries(ctx, url, _g(url)))

    def checksum(self, url: str, algorithm: str = "adler32") -> str:
        require_adler32(algorithm)
        try:
            value = on_server(url, lambda ctx: ctx.checksum(_g(url), "adler32"))
        except gfal2.GError as exc:
            raise transfer_error(exc, url) from None
        from gridxfer.movers.base import normalise_adler32
        return normalise_adler32(value)

    def unlink(self, url: str) -> None:
        try:
            context(url).unlink(_g(url))
        except gfal2.GError as exc:
            raise transfer_error(exc, url, side="destination") from None

    def mkdir(self, url: str) -> None:
        try:
            on_server(url, lambda ctx: ctx.mkdir_rec(_g(url.rstrip("/") or url), 0o755))
        except gfal2.GError as exc:
            if exc.code != 17:  # EEXIST
                raise transfer_error(exc, url, side="destination") from None

    def rename(self, src: str, dst: str) -> None:
        try:
            context(dst).rename(_g(src), _g(dst))
        except gfal2.GError as exc:
            raise transfer_error(exc, dst, side="destination") from None

    def space(self, url: str) -> tuple[int, int]:
        """(free, total) bytes: statvfs for file://, the ``spacetoken`` xattr where the plugin
        has it (root://); GridFTP has no space query (TransferError OTHER)."""
        import json
        if scheme_of(url) == "file":
            from gridxfer.movers.ops import LocalOps
            return LocalOps().space(url)
        server = urlsplit(url).netloc
        with _NO_SPACE_LOCK:
            known = _NO_SPACE.get(server)
        if known is not None and time.monotonic() < known[0]:
            raise TransferError(ErrorClass.OTHER, f"{url}: no space information ({known[1]})")
        try:
            info = json.loads(context(url).getxattr(_g(url), "spacetoken"))
        except (gfal2.GError, ValueError) as exc:
            # A GridFTP server without the query ("500 Invalid command") answers the same
            # every time, and each failed query costs a new GSI session (0.25-0.3 s of CPU,
            # measured): the space watcher polls every few seconds. Ask again after a while.
            with _NO_SPACE_LOCK:
                _NO_SPACE[server] = (time.monotonic() + NO_SPACE_RETRY, str(exc))
            raise TransferError(ErrorClass.OTHER, f"{url}: no space information ({exc})") from None
        first = info[0] if isinstance(info, list) and info else info
        return int(first.get("unusedsize", 0)), int(first.get("totalsize", 0))

    # -- copy -------------------------------------------------------------------
    def copy(self, src: str, dst: str, *, params: TransferParams,
             progress: ProgressFn | None = None) -> TransferOutcome:
        pair = (scheme_of(src), scheme_of(dst))
        if pair not in self.pairs:
            raise UsageError(f"gfal2 mover cannot copy {src} -> {dst}")
        if params.third_party and pair not in self.tpc_pairs:
            raise UsageError(
                f"gfal2 third-party copy needs gsiftp/ftp on both ends: {src} -> {dst}")

        def raw(s: str, tmp: str, report: ProgressFn | None) -> tuple[int, str]:
            return self._filecopy(s, tmp, params, report, pair)

        return verified_copy(src, dst, params, src_ops=self, dst_ops=self, raw_copy=raw,
                             progress=progress,
                             early_release=False,   # verifying beside the next copy needs
                             mover=self.name)       # one more GSI session per thread: slower

    def _filecopy(self, src: str, tmp: str, params: TransferParams, progress: ProgressFn | None,
                  pair: tuple[str, str]) -> tuple[int, str]:
        if _native(pair):       # server to server: in a child process (gfalagent.py)
            streams = max(1, int(params.streams))
            gfalagent.copy(src, tmp, params, progress, streams)
            return streams, "gfal-tpc"
        return streamed_copy(src, tmp, params, progress)


def streamed_copy(src: str, tmp: str, params: TransferParams,
                  progress: ProgressFn | None = None) -> tuple[int, str]:
    """gfal2's streamed copy of the bytes only (one stream, in this process; at least one end
    is not GridFTP's server-to-server): (streams used, mode). Also the bytes of the GridFTP
    route's one-stream implementation (movers/gridftp/streamed.py)."""
    pair = (scheme_of(src), scheme_of(tmp))
    # A streamed copy with one GridFTP end runs on that server's metadata context: its
    # session (one GSI handshake per thread and server) serves the stat / checksum /
    # rename around the copy too (measured on loopback: stat 1 ms, adler32 of 32 MB
    # 30 ms, after a filecopy on the same context). Server-to-server copies run in
    # gfalagent.py, above.
    remote = [u for u, s in ((src, pair[0]), (tmp, pair[1])) if s in GRIDFTP]
    ctx = context(remote[0]) if remote else context()
    # A streamed copy with nbstreams > 1 from gsiftp reorders 256 KiB blocks (seen with
    # gfal2 2.21 gsiftp -> root); only native copies (gfalagent.py) honour nbstreams.
    tp = copy_parameters(ctx, timeout=params.timeout, nbstreams=1,
                         tcp_buffer=params.tcp_buffer, progress=progress)
    cancellable_filecopy(ctx, tp, src, tmp, params.cancel)
    return 1, "gfal-streamed"


def cancellable_filecopy(ctx: Any, tp: Any, src: str, tmp: str, cancel: Any) -> None:
    """``ctx.filecopy(src, tmp)`` that a set ``cancel`` stops (``ctx.cancel()`` from a
    watcher thread, polled every 0.2 s): a gfal2 error becomes a classified TransferError,
    CANCELLED when the watcher stopped it. Shared by the gsiftp/root and the davs streamed
    copies."""
    done = threading.Event()
    cancelled = threading.Event()

    def watch() -> None:
        while not done.wait(0.2):
            if cancel is not None and cancel.is_set():
                cancelled.set()
                ctx.cancel()
                return

    watcher = threading.Thread(target=watch, name="gfal-cancel", daemon=True)
    watcher.start()
    try:
        ctx.filecopy(tp, _g(src), _g(tmp))
    except gfal2.GError as exc:
        if cancelled.is_set():
            raise TransferError(ErrorClass.CANCELLED, f"{src} -> {tmp}: cancelled") from None
        side = "source" if "SOURCE" in str(exc.message).upper()[:80] else "destination"
        raise transfer_error(exc, f"{src} -> {tmp}", side=side) from None
    finally:
        done.set()
        watcher.join()
