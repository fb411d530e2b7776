"""Native XRootD mover (python3-xrootd / XrdCl): file<->root, root->root, root TPC.

Streams. gfal2 ignores nbstreams for root://. XrdCl's own knob, ``SubStreamsPerChannel``,
is read when a channel is created, multiplexes only reads (5.5.3: "multiplexing writes
doesn't work properly in the server"), and hangs against a server using the throttle
plugin (measured: no byte in 75 s, until CPTimeout). So downloads (root -> file) with
``streams=N`` open the file on N separate channels, one TCP connection each (XrdCl keys
channels by host:port + login name; the login is ``gx<slot>p<i>``, slot = a small number
held by one transfer at a time, so concurrent transfers never share connections and
sequential ones reuse them), and N threads read 8 MiB chunks into the local temp file
with pwrite: N data connections, honoured on throttled servers too. XRootD refuses a
second writer on a file (ETXTBSY), so uploads use one stream; ``streams_used`` says so.
root -> root without TPC streams through this host on one connection. Third-party
copies are pulled by the destination server (``ofs.tpc``); this host carries no data.

Hangs. Checksum queries go through cksum.py (xrootd never answers a second query for a
file being checksummed over the same connection). Copies run under watch.py: no byte
for GRIDXFER_XRD_STALL_TIMEOUT (120 s) -> TIMEOUT, retried by the scheduler. The
CopyProcess copies (TPC, streamed, larger uploads, downloads) are classic.py's.
"""
from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence

from XRootD.client.flags import DirListFlags, MkDirFlags, QueryCode, StatInfoFlags

from gridxfer.errors import ErrorClass, TransferError, UsageError
from gridxfer.movers import routes
from gridxfer.movers.base import (Cancel, Copied, Entry, ProgressFn, TransferOutcome,
                                  TransferParams, require_adler32)
from gridxfer.movers.classify import transfer_error
from gridxfer.movers.integrity import check_destination_sum, checksum_policy, verified_copy
from gridxfer.movers.ops import LocalOps
from gridxfer.movers.names import check_url, check_within, join_url
from gridxfer.movers.urls import local_path, scheme_of, server_of, url_path
from gridxfer.movers.xrootd.authz import as_auth, bearer, with_cgi, xpath
from gridxfer.movers.xrootd.env import CONNECT_TIMEOUT as _CONNECT_TIMEOUT, client as xrd
from gridxfer.movers.xrootd.cksum import adler32 as xrd_adler32
from gridxfer.movers.xrootd.relay import TooLarge
from gridxfer.movers.xrootd.relaynative import upload as native_upload
from gridxfer.movers.xrootd.relaypool import run_relay
from gridxfer.movers.xrootd import bundle, classic
from gridxfer.movers.xrootd.tape import XRootDTapeOps
from gridxfer.movers.xrootd.upload import Upload, posc_honoured, posc_upload

_server = server_of
_sessions: dict[str, xrd.FileSystem] = {}     # server -> the FileSystem that connected it
_sessions_lock = threading.Lock()


def confine(src: str, params: TransferParams) -> None:
    """A local source read by Python (not by the native upload, which checks where it
    opens the file) lies under ``params.source_base``, links resolved (BAD_NAME)."""
    if params.source_base and scheme_of(src) == "file":
        check_within(params.source_base, src)


def _ignore(*_answer: object) -> None:
    """The ping's answer: the channel is what was wanted."""


class XRootDMover(XRootDTapeOps):
    """root:// copies and metadata; tape state and staging come from ``XRootDTapeOps``
    (xrootd/tape.py: ``query prepare`` / ``prepare``), so ``capabilities_of(...).tape``."""

    name = "xrootd"
    schemes, pairs, tpc_pairs = routes.XROOTD.schemes, routes.XROOTD.pairs, routes.XROOTD.tpc_pairs

    # -- sessions ---------------------------------------------------------------
    def connect(self, url: str) -> None:
        """Start logging in to ``url``'s server and return at once: an asynchronous ping
        makes XrdCl open the channel (TCP, handshake, login, authentication) that every
        later request to that server shares, so the first copy finds it open. Once per
        server and process; a failure is left to the first request to report."""
        server = _server(url)
        with _sessions_lock:
            if server in _sessions:
                return
            # kept for the process: an XrdCl FileSystem is not dropped inside its callback
            fs = _sessions[server] = xrd.FileSystem(server)
        fs.ping(timeout=_CONNECT_TIMEOUT * 3, callback=_ignore)

    # -- metadata ---------------------------------------------------------------
    def _fs(self, url: str) -> xrd.FileSystem:
        return xrd.FileSystem(_server(url))

    def _check(self, status, url: str, side: str = "source") -> None:
        if not status.ok:
            raise transfer_error(status, url, side=side)

    def stat(self, url: str) -> Entry:
        status, info = self._fs(url).stat(xpath(url), timeout=_CONNECT_TIMEOUT * 3)
        self._check(status, url)
        return Entry(url=url, size=int(info.size), is_dir=bool(info.flags & StatInfoFlags.IS_DIR),
                     pending=bool(info.flags & StatInfoFlags.POSC_PENDING))

    def listdir(self, url: str) -> list[Entry]:
        status, listing = self._fs(url).dirlist(xpath(url), DirListFlags.STAT,
                                                timeout=_CONNECT_TIMEOUT * 6)
        self._check(status, url)
        return [Entry(url=join_url(url, e.name, check=False), size=int(e.statinfo.size),
                      is_dir=bool(e.statinfo.flags & StatInfoFlags.IS_DIR))
                for e in sorted(listing, key=lambda e: e.name)]

    def checksum(self, url: str, algorithm: str = "adler32") -> str:
        require_adler32(algorithm)
        return xrd_adler32(url)     # one query per URL, own channel (cksum.py)

    def unlink(self, url: str) -> None:
        status, _ = self._fs(url).rm(xpath(url), timeout=_CONNECT_TIMEOUT * 3)
        self._check(status, url, side="destination")

    def mkdir(self, url: str) -> None:
        status, _ = self._fs(url).mkdir(with_cgi(url_path(url).rstrip("/") or "/", url),
                                        MkDirFlags.MAKEPATH,
                                        timeout=_CONNECT_TIMEOUT * 3)
        if not status.ok and status.errno != 3018:  # kXR_ItExists
            raise transfer_error(status, url, side="destination")

    def rename(self, src: str, dst: str) -> None:
        status, _ = self._fs(dst).mv(xpath(src), url_path(dst), timeout=_CONNECT_TIMEOUT * 3)
        self._check(status, dst, side="destination")

    def space(self, url: str) -> tuple[int, int]:
        """(free, total) bytes of the server's space (``query space``)."""
        status, reply = self._fs(url).query(QueryCode.SPACE, xpath(url),
                                            timeout=_CONNECT_TIMEOUT * 3)
        self._check(status, url, side="destination")
        text = reply.decode(errors="replace").strip("\x00")
        fields = dict(kv.partition("=")[::2] for kv in text.split("&"))
        try:
            return int(fields["oss.free"]), int(fields["oss.space"])
        except (KeyError, ValueError):
            raise TransferError(ErrorClass.OTHER,
                                f"{url}: unexpected space reply {reply!r}") from None

    # -- copy -------------------------------------------------------------------
    def _ops(self, url: str):
        return self if scheme_of(url) == "root" else LocalOps()

    def copy(self, src: str, dst: str, *, params: TransferParams,
             progress: ProgressFn | None = None) -> TransferOutcome:
        pair = (scheme_of(src), scheme_of(dst))
        if pair not in self.pairs:
            raise UsageError(f"xrootd mover cannot copy {src} -> {dst}")
        check_url(src)
        check_url(dst)
        if params.third_party and pair not in self.tpc_pairs:
            raise UsageError(f"third-party copy needs root:// on both ends: {src} -> {dst}")

        try:
            with bearer(params.tokens, src, dst):
                return self._copy(src, dst, pair, params, progress)
        except TransferError as exc:
            raise as_auth(exc, params.tokens) from None

    def _copy(self, src: str, dst: str, pair: tuple[str, str], params: TransferParams,
              progress: ProgressFn | None) -> TransferOutcome:
        if pair == ("file", "root") and not params.third_party and posc_honoured(dst):
            try:
                return self._direct_upload(src, dst, params, progress)
            except TransferError as exc:
                # overwrite: the old file stays until the new one is verified (temp + rename)
                if exc.error_class is not ErrorClass.EXISTS or not params.overwrite:
                    raise

        if pair == ("root", "root") and not params.third_party and posc_honoured(dst):
            try:
                return self._relay(src, dst, params, progress)
            except TooLarge:
                pass
            except TransferError as exc:
                if exc.error_class is not ErrorClass.EXISTS or not params.overwrite:
                    raise

        def raw(s: str, tmp: str, report: ProgressFn | None) -> tuple[int, str]:
            return self.raw_copy(s, tmp, params, report)

        confine(src, params)

        return verified_copy(src, dst, params, src_ops=self._ops(src), dst_ops=self._ops(dst),
                             raw_copy=raw, progress=progress, mover=self.name)

    def _relay(self, src: str, dst: str, params: TransferParams,
               progress: ProgressFn | None) -> TransferOutcome:
        """root -> root of a small file, pipelined to its final name (relay.py): the
        source's bytes checked against the catalogue before anything is written, the
        destination's (read back) against the source's before the close."""
        start = time.monotonic()
        algo, verify, expected = checksum_policy(params)
        check_dst = verify in ("destination", "both")
        # a file above READ_BACK_MAX is not read back (the bytes sent twice cost the
        # server's bandwidth: a throttled xrootd's rate halved), the server's adler32 is asked
        sent = run_relay(src, dst, params, progress, read_back=check_dst,
                         expected=expected if verify != "none" else None)
        params.data_done()
        dst_sum = None
        if check_dst:
            with self._removed_on_failure(dst):
                dst_sum = self._destination_sum(dst, sent, [("source", sent.adler32)])
        return TransferOutcome(bytes=sent.bytes, seconds=time.monotonic() - start,
                               checksum=dst_sum or (sent.adler32 if algo else None),
                               streams_used=1, mode="xrdcl-relay", mover=self.name)

    def _direct_upload(self, src: str, dst: str, params: TransferParams,
                       progress: ProgressFn | None) -> TransferOutcome:
        """file -> root:// straight to the final name under POSC (xrdupload.py), adler32
        computed on the bytes sent and compared with the server's (for small files: with
        the adler32 of the bytes read back from the server, xrdupload.READ_BACK_MAX)."""
        start = time.monotonic()
        _, verify, expected = checksum_policy(params)
        check_dst = verify in ("destination", "both")
        path = local_path(src)
        # one write request: in C++ where built (relaynative.upload), else below
        sent = native_upload(path, dst, params, progress, read_back=check_dst,
                             expected=expected if verify in ("source", "both") else None)
        if sent is None:
            confine(src, params)
            sent = posc_upload(path, dst, params, progress, own_channel=classic.own_channel,
                               read_back=check_dst)
        return self.uploaded(src, dst, params, sent, start)

    def copy_many(self, jobs: Sequence[tuple[str, str, TransferParams]],
                  stop: Cancel | None = None) -> list[Copied]:
        """Small local files to root:// in one native call (bundle.py); the others, and any
        the native upload cannot take, through ``copy``."""
        return bundle.copy_many(self, jobs, stop)

    def uploaded(self, src: str, dst: str, params: TransferParams, sent: Upload,
                 start: float) -> TransferOutcome:
        """An upload's bytes at their final name: its checks (the catalogue's adler32, the
        destination's), the file deleted if one fails."""
        algo, verify, expected = checksum_policy(params)
        check_dst = verify in ("destination", "both")
        params.data_done()
        dst_sum = None
        with self._removed_on_failure(dst):
            if verify in ("source", "both") and expected and sent.adler32 != expected:
                raise TransferError(ErrorClass.CHECKSUM,
                                    f"{src}: source adler32 {sent.adler32} != expected {expected}")
            if check_dst:
                refs = [("source", sent.adler32)] + ([("expected", expected)] if expected else [])
                dst_sum = self._destination_sum(dst, sent, refs)
        return TransferOutcome(bytes=sent.bytes, seconds=time.monotonic() - start,
                               checksum=dst_sum or (sent.adler32 if algo else None),
                               streams_used=1, mode="xrdcl-posc", mover=self.name)

    def _destination_sum(self, dst: str, sent: Upload, refs: list[tuple[str, str]]) -> str:
        """The adler32 of an upload written to its final name: the read-back's (small
        files) or the server's own, checked against ``refs`` (a CHECKSUM error)."""
        dst_sum = sent.stored_adler32 or self.checksum(dst)
        check_destination_sum(dst, dst_sum, refs)
        return dst_sum

    @contextlib.contextmanager
    def _removed_on_failure(self, dst: str) -> Iterator[None]:
        """An upload to its final name that fails its checks is deleted (best effort;
        the original error wins)."""
        try:
            yield
        except BaseException:
            with contextlib.suppress(Exception):
                self.unlink(dst)
            raise

    def raw_copy(self, src: str, tmp: str, params: TransferParams,
                 progress: ProgressFn | None = None) -> tuple[int, str]:
        """Move the bytes only (no verification, no temp name): (streams used, mode)."""
        return classic.raw_copy(src, tmp, params, progress)
