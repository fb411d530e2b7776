"""gridxfer's own GridFTP client for uploads to gsiftp:// and the metadata around them.

One GSI control session per thread and server (``ftpcontrol.GsiControl``: no delegated
proxy, so no RSA key generation on the server per session), reused for every file. An
upload pipelines (MLST of the final name,) PASV and STOR, its data connection usually
opened ahead (movers/gridftp/data.py), and sends the file with ``sendfile`` on one stream
(MODE S); verified_copy's metadata follows on the same session. On the 20 ms testbed link
the first byte leaves ~0.5 s sooner than with gfal2 (BENCHMARKS.md, "Sixth pass").

``NativeGridFTP.usable(url)`` says False for servers this client could not authenticate
to (wrong credentials, a host certificate only Globus' name rules accept, a server that
insists on delegation): the callers then use gfal2 for that server for the next ten
minutes (RETRY_NATIVE). ``GRIDXFER_GRIDFTP=gfal2`` turns this client off. The Ops that
choose between the two per URL are movers/gridftp/ops.py.
"""
from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from urllib.parse import urlsplit

from gridxfer.errors import TransferError
from gridxfer.movers.base import (Entry, ProgressFn, TransferParams, normalise_adler32,
                                  require_adler32)
from gridxfer.movers.gridftp import data as ftpdata, replies
from gridxfer.movers.classify import transfer_error
from gridxfer.movers.gridftp.control import REPLY_TIMEOUT as REPLY_WAIT
from gridxfer.movers.gridftp.control import FtpError, GsiControl, NativeUnavailable, Reply
from gridxfer.movers import names
from gridxfer.movers.urls import local_path, scheme_of

IDLE_CHECK = 30.0                 # s idle after which a session is probed before a STOR
_local = threading.local()
RETRY_NATIVE = 600.0              # s before a server that refused this client is tried again
_REFUSED: dict[str, tuple[float, str]] = {}   # netloc -> (retry after, why it refused)
_REFUSED_LOCK = threading.Lock()


def enabled() -> bool:
    return os.environ.get("GRIDXFER_GRIDFTP", "native").lower() != "gfal2"


def _path(url: str) -> str:
    """The path sent in a command: decoded (movers/names.py), never with a CR or LF."""
    return names.server_path(url)


class NativeGridFTP:
    """Uploads and metadata over gridxfer's GSI control sessions (gsiftp:// only)."""

    name = "gridftp-native"

    # -- sessions ----------------------------------------------------------------------
    @staticmethod
    def usable(url: str) -> bool:
        if scheme_of(url) != "gsiftp" or not enabled():
            return False
        return refused(url) is None

    @staticmethod
    def _session(url: str) -> GsiControl:
        parts = urlsplit(url)
        cache = _sessions()
        session = cache.get(parts.netloc)
        if session is None:
            try:
                # PASV rides on the login: the first upload's data connection is opened
                # while the session's first commands (MLST, MKD) run
                session = GsiControl(parts.hostname or "localhost", parts.port or 2811,
                                     after_login=("PASV",))
            except NativeUnavailable as exc:
                with _REFUSED_LOCK:
                    _REFUSED[parts.netloc] = (time.monotonic() + RETRY_NATIVE, str(exc))
                raise
            cache[parts.netloc] = session
            _prepare_from(parts.netloc, session, session.after_login[0])
        return session

    @staticmethod
    def _drop(url: str) -> None:
        netloc = urlsplit(url).netloc
        session = _sessions().pop(netloc, None)
        if session is not None:
            session.close()
        ftpdata.discard(netloc)

    def _run(self, url: str, commands: list[str], *, side: str) -> list[Reply]:
        """Pipeline ``commands`` on this thread's session (one new session and one more
        try if the kept one was closed by the server while idle)."""
        for attempt in (1, 2):
            fresh = urlsplit(url).netloc not in _sessions()
            try:
                return self._session(url).pipeline(commands)
            except (OSError, ValueError) as exc:
                self._drop(url)
                if fresh or attempt == 2:
                    raise transfer_error(exc, url, side=side) from None
        raise AssertionError("unreachable")

    def _one(self, url: str, command: str, *, side: str = "source") -> Reply:
        reply = self._run(url, [command], side=side)[0]
        if not reply.ok:
            raise replies.error(url, command, reply, side)
        return reply

    # -- metadata (the Ops protocol of movers/integrity.py) ---------------------------------
    def stat(self, url: str) -> Entry:
        facts = replies.facts(self._one(url, f"MLST {_path(url)}").text)
        return Entry(url=url, size=int(facts.get("size", 0)),
                     is_dir=facts.get("type", "").lower() in ("dir", "cdir", "pdir"))

    def checksum(self, url: str, algorithm: str = "adler32") -> str:
        require_adler32(algorithm)
        reply = self._one(url, f"CKSM ADLER32 0 -1 {_path(url)}")
        return normalise_adler32(reply.text.split()[-1])

    def unlink(self, url: str) -> None:
        self._one(url, f"DELE {_path(url)}", side="destination")

    def mkdir(self, url: str) -> None:
        """Create the directory and its missing parents (an existing one is fine): MKD and
        MLST in one round trip per level."""
        path = _path(url).rstrip("/") or "/"
        missing = []
        while path not in ("", "/") and not self._made(url, path):
            missing.append(path)
            path = path.rsplit("/", 1)[0]
        for path in reversed(missing):
            made = self._mkd(url, path)
            if made is not None:
                raise replies.error(url, f"MKD {path}", made, "destination")

    def _made(self, url: str, path: str) -> bool:
        return self._mkd(url, path) is None

    def _mkd(self, url: str, path: str) -> Reply | None:
        """MKD ``path``: None if it is a directory now (made or already there), else the
        MKD reply that says why not."""
        made, state = self._run(url, [f"MKD {path}", f"MLST {path}"], side="destination")
        if made.ok or (state.ok and replies.facts(state.text).get("type", "").lower()
                       in ("dir", "cdir")):
            return None
        return made

    def rename(self, src: str, dst: str) -> None:
        command = f"RNTO {_path(dst)}"
        rnfr, rnto = self._run(dst, [f"RNFR {_path(src)}", command], side="destination")
        for sent, reply in ((f"RNFR {_path(src)}", rnfr), (command, rnto)):
            if not reply.ok:
                raise replies.error(dst, sent, reply, "destination")

    # -- upload ------------------------------------------------------------------------
    def upload(self, src: str, dst: str, params: TransferParams,
               progress: ProgressFn | None = None, *, release_early: bool = False,
               refuse: str | None = None) -> int:
        """file:// -> gsiftp:// on one stream; the bytes sent. Any failure drops the
        session (a half-done STOR leaves it in an unknown state). ``release_early``:
        signal ``params.data_done`` as soon as the last byte is in the socket, so the
        next transfer sets up (3 round trips) while this one's send buffer drains.
        ``refuse``: a URL that must not exist (the final name, overwrite off); its MLST
        goes in the STOR's flight and is answered while the first flight travels. If it
        exists, the STOR ends there, the partial file is deleted and EXISTS raised."""
        try:
            return self._upload(src, dst, params, progress, release_early, refuse)
        except TransferError:
            self._drop(dst)
            raise
        except FtpError as exc:
            self._drop(dst)
            raise replies.error(dst, "STOR", exc.reply, "destination") from None
        except (OSError, ValueError) as exc:
            self._drop(dst)
            raise transfer_error(exc, f"{src} -> {dst}", side="destination") from None

    def _upload(self, src: str, dst: str, params: TransferParams,
                progress: ProgressFn | None, release_early: bool, refuse: str | None) -> int:
        path = local_path(src)
        deadline = time.monotonic() + params.timeout
        with open(path, "rb") as fh:            # a missing source fails here, before STOR
            size = os.fstat(fh.fileno()).st_size
            session = self._live_session(dst)
            data = ftpdata.take(urlsplit(dst).netloc)
            probe = [f"MLST {_path(refuse)}"] if refuse else []
            found = None                    # refuse exists: True / False; None: not read yet
            if data is not None:            # PASV and connect were done after the last STOR
                session.send(probe + [f"STOR {_path(dst)}"])
            else:
                session.send(probe + ["PASV", f"STOR {_path(dst)}"])
                if refuse:
                    found = replies.found(refuse, session.reply())
                address = session.passive_address(session.reply())
                data = ftpdata.connect(address)
            try:
                if params.tcp_buffer:
                    data.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, int(params.tcp_buffer))
                ahead = 0 if found else ftpdata.send_ahead(data, fh, size)
                if refuse and found is None:
                    found = replies.found(refuse, session.reply())
                if found and refuse:
                    raise replies.abandon(session, data, refuse)
                started = session.reply()
                if started.code not in (125, 150):
                    raise FtpError("STOR", started)
                sent = ftpdata.send_file(data, fh, size, params, progress, deadline, ahead)
                data.shutdown(socket.SHUT_WR)
                if release_early:
                    params.data_done()
            finally:
                data.close()
            # The server answers once the file is closed on its storage: give it what is
            # left of the transfer's time, not only the reply timeout.
            session.sock.settimeout(max(REPLY_WAIT, deadline - time.monotonic()))
            try:
                done = session.reply()
            finally:
                session.sock.settimeout(REPLY_WAIT)
            if not done.ok:
                raise FtpError("STOR", done)
            if release_early:               # a campaign: another upload is likely to follow
                self.prepare(dst)
            return sent

    def prepare(self, url: str) -> None:
        """Open the data connection of this thread's next upload to ``url``'s server now
        (PASV, connect): its STOR then sends at once, two round trips sooner. Idle
        seconds of the session are used for it; a failure only means it is not ready."""
        netloc = urlsplit(url).netloc
        if netloc in ftpdata.prepared():
            return
        try:
            session = self._session(url)
            if netloc not in ftpdata.prepared():        # (a new session has one already)
                _prepare_from(netloc, session, session.command("PASV", check=False))
        except (OSError, ValueError, FtpError):
            self._drop(url)

    def _live_session(self, url: str) -> GsiControl:
        """This thread's session, checked with NOOP if it sat idle (the server may have
        closed it); a STOR must not be the command that finds out."""
        session = self._session(url)
        if time.monotonic() - session.last_used > IDLE_CHECK:
            try:
                session.command("NOOP")
            except (OSError, FtpError, ValueError):
                self._drop(url)
                session = self._session(url)
        return session


def _prepare_from(netloc: str, session: GsiControl, pasv: Reply) -> None:
    """Start connecting to the address of a 227 reply, for the next upload (``take``
    waits for the connection to finish); a PASV that failed leaves nothing prepared."""
    if pasv.code != 227:
        return
    with contextlib.suppress(OSError, ValueError):  # the upload then opens its own
        ftpdata.keep(netloc, ftpdata.connect_later(session.passive_address(pasv)))


def _sessions() -> dict[str, GsiControl]:
    """This thread's sessions, by server (host:port)."""
    cache = getattr(_local, "sessions", None)
    if cache is None:
        cache = _local.sessions = {}
    return cache


def refused(url: str) -> str | None:
    """Why this client gave up on ``url``'s server, or None. A refusal is forgotten after
    RETRY_NATIVE s: a proxy renewed during a long campaign gets this client back."""
    netloc = urlsplit(url).netloc
    with _REFUSED_LOCK:
        known = _REFUSED.get(netloc)
        if known is None:
            return None
        if time.monotonic() >= known[0]:
            del _REFUSED[netloc]
            return None
        return known[1]
