"""``TapeOps`` (movers/tape.py) for root:// through XRootD's own prepare interface (XrdCl).

- ``archive_status`` / ``stage_status``: ``query prepare`` (kXR_query QPrep) with the
  argument ``<request id>\\n<path>\\n<path>...``: ONE request for many files. A tape
  endpoint answers the JSON EOS-CTA writes (and gfal2/FTS3 read)::

      {"request_id": "...", "responses": [{"path": "/data/f", "path_exists": true,
        "on_tape": true, "online": false, "requested": true, "error_text": ""}, ...]}

  A missing flag reads as false (the testbed's prepare program, testbed/tapegpi.py, leaves
  false flags out). xrootd 5.5's prepare plugin (libXrdOfsPrepGPI) returns at most ~2 KB of
  an answer (Max_Error_Len; ``-maxresp`` came later) and answers a longer one with "No
  information available."; so when an answer comes back cut, the batch is halved, and the
  size that fitted is remembered per server. The sub-requests of one poll are sent at once
  (XrdCl callbacks on one channel): one round trip.
- ``bring_online``: ``prepare -s`` (PrepareFlags.STAGE), up to ``MAX_BULK`` files per
  request; returns the server's request id. XRootD's prepare carries no pin lifetime
  (``pin_lifetime_s`` is not sent); ``timeout_s`` bounds the request itself.
- ``release``: ``prepare -e`` (EVICT): the disk copies of staged files may go.

The Python bindings need the file list as bytes (xrootd/xrootd#2011: str aborts the
interpreter in 5.5). Names for h19-camp: ``XRootDMover`` has these methods, so
``capabilities_of(mover_for("root://..."))`` ``.tape`` is this.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Sequence

from XRootD.client.flags import PrepareFlags, QueryCode

from gridxfer.errors import ErrorClass, TransferError, UsageError
from gridxfer.movers.classify import transfer_error
from gridxfer.movers.tape import MAX_BULK, Residency, TapeState, batches
from gridxfer.movers.urls import server_of, url_path
from gridxfer.movers.xrootd.env import CONNECT_TIMEOUT, client as xrd

QUERY_TIMEOUT = CONNECT_TIMEOUT * 6
_CUT = ("No information available.", "***response has been truncated***")


def _one_server(urls: Sequence[str]) -> str:
    servers = {server_of(u) for u in urls}
    if len(servers) != 1:
        raise UsageError(f"tape operations take the URLs of one server, not {len(servers)}")
    return servers.pop()


def state_of(url: str, entry: dict) -> TapeState:
    """One ``responses`` entry -> TapeState."""
    exists, on_tape, online = (bool(entry.get(k)) for k in ("path_exists", "on_tape", "online"))
    requested, error = bool(entry.get("requested")), str(entry.get("error_text") or "")
    if not exists:
        where = Residency.MISSING
    elif error:
        where = Residency.ERROR
    elif on_tape:
        where = Residency.ON_TAPE if online else Residency.TAPE_ONLY
    elif online:
        where = Residency.DISK_ONLY
    else:
        where, error = Residency.ERROR, "neither on disk nor on tape"
    return TapeState(url, where, requested, error)


class XRootDTapeOps:
    """Mixed into ``XRootDMover``: bulk tape state and staging over XRootD's prepare."""

    _fit_lock = threading.Lock()
    _fit: dict[str, int] = {}          # server -> files per query answer known to fit
    queries_sent = 0                   # query prepare requests sent (tests, bench)

    # -- status ---------------------------------------------------------------
    def archive_status(self, urls: Sequence[str]) -> dict[str, TapeState]:
        return self.stage_status(urls, None)

    def stage_status(self, urls: Sequence[str],
                     request_id: str | None = None) -> dict[str, TapeState]:
        if not urls:
            return {}
        server = _one_server(urls)
        out: dict[str, TapeState] = {}
        pending = [list(b) for b in batches(list(urls), self._fit_of(server))]
        while pending:
            answers = self._query_all(server, pending, request_id or "*")
            pending = []
            for batch, answer in answers:
                if answer is None:             # cut: halve it, remember what fits
                    if len(batch) == 1:
                        raise TransferError(ErrorClass.OTHER, f"{server}: the query prepare "
                                            "answer for one file does not fit")
                    half = (len(batch) + 1) // 2
                    with self._fit_lock:
                        self._fit[server] = min(self._fit.get(server, MAX_BULK), half)
                    pending += [batch[:half], batch[half:]]
                    continue
                out.update(answer)
        return out

    def _fit_of(self, server: str) -> int:
        with self._fit_lock:
            return self._fit.get(server, MAX_BULK)

    def _query_all(self, server: str, batches_: list[list[str]], rid: str
                   ) -> list[tuple[list[str], dict[str, TapeState] | None]]:
        """Send every batch's query at once; (batch, answer or None when cut)."""
        fs = xrd.FileSystem(server)
        done = threading.Semaphore(0)
        replies: list[tuple[object, object]] = [(None, None)] * len(batches_)

        def handler(i: int):
            def cb(status, response, hostlist=None) -> None:
                replies[i] = (status, response)
                done.release()
            return cb

        for i, batch in enumerate(batches_):
            arg = "\n".join([rid, *(url_path(u) for u in batch)])
            type(self).queries_sent += 1
            status = fs.query(QueryCode.PREPARE, arg, timeout=QUERY_TIMEOUT, callback=handler(i))
            if not status.ok:
                raise transfer_error(status, server)
        for _ in batches_:
            if not done.acquire(timeout=QUERY_TIMEOUT + 5):
                raise TransferError(ErrorClass.TIMEOUT, f"{server}: query prepare unanswered")
        return [(batch, self._parse(server, batch, *reply))
                for batch, reply in zip(batches_, replies, strict=True)]

    @staticmethod
    def _parse(server: str, batch: list[str], status, response) -> dict[str, TapeState] | None:
        if status is None or not status.ok:
            raise transfer_error(status, server)
        # the answer ends at its NUL (xrootd 5.5 sends a byte more after it)
        text = bytes(response or b"").partition(b"\0")[0].decode(errors="replace").strip()
        if any(text.startswith(c) or text.endswith(c) for c in _CUT):
            return None
        try:
            entries = json.loads(text)["responses"]
            by_path = {str(e["path"]): e for e in entries}
        except (ValueError, KeyError, TypeError):
            raise TransferError(ErrorClass.OTHER, f"{server}: query prepare answer is not "
                                f"tape state: {text[:120]!r}") from None
        out = {}
        for url in batch:
            entry = by_path.get(url_path(url))
            out[url] = (state_of(url, entry) if entry is not None else
                        TapeState(url, Residency.ERROR, error="not in the server's answer"))
        return out

    # -- staging --------------------------------------------------------------
    def bring_online(self, urls: Sequence[str], pin_lifetime_s: float,
                     timeout_s: float) -> str:
        if not urls:
            raise UsageError("bring_online needs at least one file")
        server = _one_server(urls)
        ids = [self._prepare(server, batch, PrepareFlags.STAGE, timeout_s)
               for batch in batches(list(urls))]
        return ",".join(ids)

    def release(self, urls: Sequence[str], request_id: str | None = None) -> None:
        if urls:
            server = _one_server(urls)
            for batch in batches(list(urls)):
                self._prepare(server, batch, PrepareFlags.EVICT, QUERY_TIMEOUT)

    @staticmethod
    def _prepare(server: str, batch: list[str], flags: int, timeout: float) -> str:
        fs = xrd.FileSystem(server)
        status, response = fs.prepare([url_path(u).encode() for u in batch], flags,
                                      timeout=max(1, int(timeout)))
        if not status.ok:
            raise transfer_error(status, server)
        return bytes(response or b"").partition(b"\0")[0].decode(errors="replace").strip()
