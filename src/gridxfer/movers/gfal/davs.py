"""davs:// and https:// on gfal2's HTTP plugin (davix): copies to and from local files,
XRootD and GridFTP streamed through this host, and HTTP third-party copies
(:mod:`gridxfer.movers.gfal.httptpc`) between two WebDAV servers.

Why gfal2 and not a client of our own: see docs/performance-notes.md ("davs://"); a
library is the default unless a measurement says otherwise. One did: a small file (up to
``SMALL``) is sent by ``davput`` and checked by ``davhead`` and ``davmove`` on a kept
connection, as gfal2 made davix load the X.509 proxy for every request and close every
PUT's connection (performance notes, "Small files over davs://"); any answer those do not
take goes back to gfal2.

Integrity (the one path, ``integrity.verified_copy``): XrdHttp 5.5.3 writes a PUT
straight into the named file, so an interrupted upload would be visible under the final
name. Every copy therefore writes the temporary name (``.name.gxpart-*``) and renames it
with WebDAV ``MOVE`` once size and adler32 match (a name that needs percent-encoding:
``davmove``, whose decoded ``Destination`` XrdHttp 5.5.3 needs). The server's adler32 is gfal2's
checksum, which XrdHttp answers to ``Want-Digest: adler32`` (``Digest: adler32=<8 hex>``);
``normalise_adler32`` zero-pads it. A failed copy deletes the temporary name: with the
WLCG scopes this needs ``storage.modify`` (``storage.create`` may PUT and MOVE a new file
but not delete one: measured on XrdHttp 5.5.3 with the SciTokens plugin).

Tokens: ``TransferParams.tokens`` (a ``TokenPair``) go to gfal2 through its credential
API (``cred_set(url prefix, BEARER)``) on this thread's context, never through argv,
the environment of another process or a log. A context's credentials are cleaned before
each operation, so a token never serves another transfer's URL. With no token for a URL,
gfal2 falls back on ``BEARER_TOKEN`` (and X.509 for anonymous servers).
"""
from __future__ import annotations

import re
import threading
import time
from dataclasses import replace
from urllib.parse import urlsplit

import gfal2

from gridxfer.errors import ErrorClass, TransferError, UsageError
from gridxfer.movers import names, routes, toolurls
from gridxfer.movers.tokens import token_for
from gridxfer.movers.base import (Entry, ProgressFn, TokenPair, TransferOutcome,
                                  TransferParams, normalise_adler32, require_adler32)
from gridxfer.movers.classify import transfer_error
from gridxfer.movers.dstcheck import DestinationCheck
from gridxfer.movers.gfal import davhead, davmove, davput, digestgate, meta
from gridxfer.movers.gfal.mover import GfalMover, new_context
from gridxfer.movers.integrity import checksum_policy, verified_copy
from gridxfer.movers.ops import LocalOps, Ops, StatOnce
from gridxfer.movers.urls import scheme_of

HTTP = routes.HTTP
# bytes: a davs destination file up to this size is checked and moved by davhead and davmove
# on a kept connection (one request each; gfal2 configured a session and loaded the proxy
# again for each: docs/performance-notes.md, session 35). A larger one keeps gfal2's
# metadata path, whose next call opens the connection the next PUT takes (davix closes
# every PUT's), so no handshake lands on a bulk file's data path.
SMALL = 4 << 20
CHECKSUM_TRIES = 3                  # a checksum answered with HTTP 5xx is asked again
CHECKSUM_BACKOFF = 0.5              # s, doubled each time
_SERVER_ERROR = re.compile(r"\bHTTP 5\d\d\b")
_local = threading.local()
_g = toolurls.gfal_url


def _prefix(url: str) -> str:
    """The credential's scope in gfal2: the server (a credential applies below its URL)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/"


def http_context(key: str, tokens: dict[str, str | None]) -> gfal2.Gfal2Context:
    """This thread's gfal2 context for ``key`` (a server, or "<copy>"), its credentials
    replaced by ``tokens`` (URL -> token or None). Streamed copies only: TPC runs in the
    agent child (httptpc.py)."""
    cache = getattr(_local, "contexts", None)
    if cache is None:
        cache = _local.contexts = {}
    ctx = cache.get(key)
    if ctx is None:
        ctx = new_context()
        ctx.set_opt_string("HTTP PLUGIN", "DEFAULT_COPY_MODE", "streamed")
        ctx.set_opt_boolean("HTTP PLUGIN", "ENABLE_REMOTE_COPY", False)
        ctx.set_opt_boolean("HTTP PLUGIN", "ENABLE_FALLBACK_TPC_COPY", False)
        ctx.set_opt_boolean("HTTP PLUGIN", "RETRIEVE_BEARER_TOKEN", False)
        cache[key] = ctx
    ctx.cred_clean()
    for url, token in tokens.items():
        if token and scheme_of(url) in HTTP:
            ctx.cred_set(_prefix(url), ctx.cred_new("BEARER", token))
    return ctx


class HttpOps:
    """Metadata on davs/https URLs with one side's token (None: gfal2's own discovery)."""

    def __init__(self, token: str | None = None) -> None:
        self._token = token

    def __repr__(self) -> str:
        return f"HttpOps(token={'<token>' if self._token else None})"

    def _ctx(self, url: str) -> gfal2.Gfal2Context:
        # no token of its own (the registry's metadata mover): this thread's for the
        # server, if a campaign set one (movers.tokens: a source listing, a clean-up)
        return http_context(urlsplit(url).netloc, {url: self._token or token_for(url)})

    def stat(self, url: str) -> Entry:
        return meta.stat_entry(self._ctx(url), url)

    def listdir(self, url: str) -> list[Entry]:
        return meta.list_entries(self._ctx(url), url)

    def checksum(self, url: str, algorithm: str = "adler32") -> str:
        """The server's adler32 (XrdHttp: ``Want-Digest``), 8 lowercase hex digits. A 5xx
        answer is asked again (XrdHttp 5.5.3 answers 500 to a checksum under load, as
        xrootd's [3012]: gfal-copy lost 2 of 3 bench rounds to it), then it is the error.
        At most ``GRIDXFER_HTTP_DIGEST_SLOTS`` at once per server (``digestgate``)."""
        require_adler32(algorithm)
        for attempt in range(CHECKSUM_TRIES):
            try:
                with digestgate.held(url):      # no more at once than the server's jobs
                    return normalise_adler32(self._ctx(url).checksum(url, "adler32"))
            except gfal2.GError as exc:
                if attempt + 1 < CHECKSUM_TRIES and _SERVER_ERROR.search(str(exc.message)):
                    time.sleep(CHECKSUM_BACKOFF * 2 ** attempt)
                    continue
                raise transfer_error(exc, url) from None
        raise AssertionError("unreachable")

    def unlink(self, url: str) -> None:
        try:
            self._ctx(url).unlink(url)
        except gfal2.GError as exc:
            raise transfer_error(exc, url, side="destination") from None

    def mkdir(self, url: str) -> None:
        try:
            self._ctx(url).mkdir_rec(url.rstrip("/") + "/", 0o755)
        except gfal2.GError as exc:
            if exc.code != 17:  # EEXIST
                raise transfer_error(exc, url, side="destination") from None

    def rename(self, src: str, dst: str) -> None:
        """WebDAV MOVE within one server (nothing to do for a file written in place). A
        final name that needs percent-encoding goes through ``davmove`` (the decoded
        ``Destination`` that gfal2 cannot send)."""
        if src == dst:
            return
        token = self._token or token_for(dst)
        if toolurls.encoded(dst) and davmove.plan(dst, token) == "raw":
            davmove.move(src, dst, token)
            return
        try:
            self._ctx(dst).rename(src, dst)
        except gfal2.GError as exc:
            raise transfer_error(exc, dst, side="destination") from None


class HeadOps(HttpOps):
    """A copy's davs destination: whether the final name is there, the written temporary
    name's size (and with ``digest`` its adler32, in the same request) and a plain name's
    MOVE, on this thread's kept connection (``davhead``, ``davmove``: one request each
    where gfal2 made davix configure a session and load the proxy again); gfal2 for every
    answer those do not read, and for the rest."""

    def __init__(self, token: str | None = None, *, digest: bool = False,
                 read_back: bool = False, source: bool = False) -> None:
        super().__init__(token)
        self._digest, self._read_back, self._source = digest, read_back, source
        self._sums: dict[str, str] = {}

    def stat(self, url: str) -> Entry:
        if self._read_back:         # a small file's size and adler32: its bytes, read back
            got = davhead.read_back(url, self._token)
        elif self._source:          # a source may be a directory: PROPFIND tells it
            got = davhead.propstat(url, self._token)
        else:
            got = davhead.head(url, self._token, digest=self._digest)
        if got is None:
            return super().stat(url)
        if not got.found:
            raise TransferError(ErrorClass.SOURCE_MISSING, f"{url}: no such file (HTTP 404)")
        if got.adler32:
            self._sums[url] = got.adler32
        return Entry(url, got.size, is_dir=got.directory)

    def checksum(self, url: str, algorithm: str = "adler32") -> str:
        require_adler32(algorithm)
        return self._sums.pop(url, None) or super().checksum(url, algorithm)

    def rename(self, src: str, dst: str) -> None:
        if src != dst and not toolurls.encoded(dst) and davmove.carries(dst):
            davmove.move(src, dst, self._token)     # the same bytes as gfal2's Destination
            return
        super().rename(src, dst)


_GFAL_OPS = GfalMover()


def ops_for(url: str, token: str | None) -> Ops:
    """The metadata operations for one end of a copy: local, HTTP (with its token) or
    gfal2 for root/gsiftp/ftp."""
    scheme = scheme_of(url)
    if scheme == "file":
        return LocalOps()
    if scheme in HTTP:
        return HttpOps(token)
    return _GFAL_OPS


class DavsMover(HttpOps):
    """file/root/gsiftp/ftp <-> davs/https streamed; davs/https -> davs/https streamed or
    HTTP-TPC (``third_party``). Metadata through ``mover_for`` has no token of its own: it
    uses this thread's (``movers.tokens``: a campaign's source listing, an attempt's clean-up)."""

    name = "davs"
    schemes, pairs, tpc_pairs = routes.DAVS.schemes, routes.DAVS.pairs, routes.DAVS.tpc_pairs

    def __init__(self) -> None:
        super().__init__(None)

    def copy(self, src: str, dst: str, *, params: TransferParams,
             progress: ProgressFn | None = None) -> TransferOutcome:
        pair = (scheme_of(src), scheme_of(dst))
        if pair not in self.pairs:
            raise UsageError(f"davs mover cannot copy {src} -> {dst}")
        if params.third_party and pair not in self.tpc_pairs:
            raise UsageError(f"HTTP third-party copy needs davs/https on both ends: {src} -> {dst}")
        tokens = params.tokens or TokenPair()
        src_ops, dst_ops = ops_for(src, tokens.src), ops_for(dst, tokens.dst)
        check_ops = dst_ops
        small = None                        # the size of a small file to a davs server
        if pair[1] in HTTP:
            names.check_url(src)            # before any request (verified_copy asks again)
            names.check_url(dst)
            verify = checksum_policy(params)[1]
            if pair[0] in HTTP and not params.third_party:
                src_ops = HeadOps(tokens.src, source=True)
            entry = src_ops.stat(src)           # a directory: refused by verified_copy
            if entry.size <= SMALL and isinstance(src_ops, HeadOps):  # davput's one GET:
                src_ops = davput.Fetched(src_ops, entry, tokens.src)   # its bytes' adler32
            elif type(src_ops) is not LocalOps:     # a remote stat asked once; a local one
                src_ops = StatOnce(src_ops, entry)  # stays LocalOps (its adler32 can stop)
            if entry.size <= SMALL:
                small = entry.size
                dst_ops = HeadOps(tokens.dst, digest=verify in ("destination", "both"),
                                  read_back=entry.size <= davhead.READ_BACK_MAX)
                check_ops = HeadOps(tokens.dst)
        if pair[1] in HTTP and toolurls.encoded(dst) and \
                davmove.plan(dst, tokens.dst) == "in_place":
            # XrdHttp 5.5.3's MOVE takes the Destination path literally (no %XX decoding;
            # XrdHttpReq.cc, measured): davmove sends it decoded, which names every file
            # but one ending in white space (the header is trimmed); other servers take
            # gfal2's encoded one. The rest (those few, an unmeasured XrdHttp) are written
            # in place, verified there and deleted on failure, visible while written
            params = replace(params, temp_url=dst)

        # overwrite off: the destination's HEAD runs beside the copy, not one round trip
        # before it (dstcheck.py); a copy written in place is still refused before it starts
        to_temp = params.temp_url != dst
        beside = to_temp and not params.overwrite

        def raw(s: str, tmp: str, report: ProgressFn | None) -> tuple[int, str]:
            check = DestinationCheck(check_ops, dst, params) if beside else None
            run = check.params if check is not None else params
            try:
                if run.third_party:
                    from gridxfer.movers.gfal import httptpc
                    out = httptpc.copy(s, tmp, run, report, dst_ops)
                elif small is not None and davput.copy(s, tmp, run, small, src_ops,
                                                       stall=davput.stall_timeout()):
                    if report is not None:
                        report(small, small)
                    out = 1, davput.MODE
                else:
                    out = streamed(s, tmp, run, report)
            except TransferError:
                if check is not None:
                    check.settle(quiet=True)
                raise
            if check is not None:
                check.settle()
            return out

        return verified_copy(src, dst, params, src_ops=src_ops, dst_ops=dst_ops, raw_copy=raw,
                             progress=progress, copy_checks_destination=to_temp, mover=self.name)


def _session_key(src: str, dst: str) -> str:
    """The context a streamed copy runs on: with one HTTP end, that server's (the one its
    metadata calls use), so the PUT or GET takes the connection the last MKCOL, stat or
    MOVE left open instead of a TCP and TLS handshake of its own. davix (neon backend,
    0.8.4) closes a connection after a PUT sent with ``Expect: 100-continue``
    (``NeonRequest::createBackendRequest``: ``doNotReuseSession``), so each upload used to
    open one: ~3 round trips on the data path per file, now on the verification's side."""
    http = [u for u in (src, dst) if scheme_of(u) in HTTP]
    return urlsplit(http[0]).netloc if len(http) == 1 else "<copy>"


def streamed(src: str, tmp: str, params: TransferParams,
             progress: ProgressFn | None = None) -> tuple[int, str]:
    """The bytes through this host (gfal2 filecopy in streamed mode, one stream)."""
    from gridxfer.movers.gfal.mover import cancellable_filecopy, copy_parameters
    tokens = params.tokens or TokenPair()
    ctx = http_context(_session_key(src, tmp), {src: tokens.src, tmp: tokens.dst})
    tp = copy_parameters(ctx, timeout=params.timeout, nbstreams=1,
                         tcp_buffer=params.tcp_buffer, progress=progress)
    try:
        cancellable_filecopy(ctx, tp, src, tmp, params.cancel)
    finally:
        ctx.cred_clean()
    return 1, "davs-streamed"
