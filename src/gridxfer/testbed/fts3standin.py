"""A STAND-IN for an FTS3 REST server (issue 23): NOT FTS3. The FTS3 server cannot be
installed from Debian or PyPI, so the tests drive the official ``fts3`` client against this
HTTP server on loopback. It checks every submission as fts-rest-flask does (``fts3rules``),
stores what fts-rest stores, and serves the state sequences an FTS3 reports as its
transfer daemon would move them (no transfer happens: states only).

Each status request for a job moves each of its unfinished files one step along its
sequence: STAGING (bring_online) -> SUBMITTED -> ACTIVE -> [ARCHIVING (archive_timeout)]
-> FINISHED, or FAILED with the reason ``fail(file)`` returns. Authentication: a bearer
token (``token``), as FTS3 accepts from a token-enabled client, or (``tls=``: HTTPS) a
client certificate or RFC proxy with proxy delegation (``fts3delegation``); else 401
(``fts3http``: the HTTP side).
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from typing import Any

from gridxfer.testbed.fts3delegation import Delegations, delegation_id, server_context
from gridxfer.testbed import fts3http
from gridxfer.testbed.fts3http import TOKEN_DN
from gridxfer.testbed.fts3rules import Broken, Conflict, Refused, build_job

TERMINAL = ("FINISHED", "FAILED", "CANCELED")
FailRule = Callable[[dict[str, Any]], "str | None"]


class StandIn:
    """The stand-in's state (jobs, files, what was posted); ``url`` once started."""

    def __init__(self, token: str, *, vo: str = "gridxfer", fail: FailRule | None = None,
                 on_submit: Callable[[dict[str, Any]], None] | None = None,
                 tls: tuple[str, str, str] | None = None) -> None:
        self.token, self.vo, self.tls = token, vo, tls    # tls: (cert, key, CA file)
        self.delegations = Delegations()
        self.fail = fail or (lambda f: None)
        self.on_submit = on_submit      # called with the stored job before the reply
        self.jobs: dict[str, dict[str, Any]] = {}
        self.files: dict[str, list[dict[str, Any]]] = {}
        self.tokens: dict[str, dict[str, Any]] = {}     # t_token: id -> claims (no token)
        self.posts: list[dict[str, Any]] = []       # every POST /jobs body, accepted or not
        self.refused: list[str] = []
        self.duplicates = 0                          # submissions of an existing job id
        self.flaky = 0          # the next this many job requests: 503 (after a POST is stored)
        self.hold = False       # True: no state moves (a daemon with no free slot)
        self.lock = threading.Lock()
        self._next_file = 1
        self._server: ThreadingHTTPServer | None = None

    # ------------------------------------------------------------- lifecycle
    def start(self) -> str:
        standin = self

        class Handler(fts3http.Handler):
            owner = standin
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if self.tls is not None:
            self._server.socket = server_context(*self.tls).wrap_socket(
                self._server.socket, server_side=True)
        threading.Thread(target=self._server.serve_forever, name="fts3-standin",
                         daemon=True).start()
        return self.url

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.server_address[1]
        return f"https://localhost:{port}" if self.tls else f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # ------------------------------------------------------------- the API
    def submit(self, body: dict[str, Any], method: str = "oauth2",
               dn: str = TOKEN_DN) -> tuple[int, Any]:
        vo = self.vo if method == "oauth2" else delegation_id(dn)     # a "virtual VO"
        if method == "certificate":
            why = self.delegations.may_submit(delegation_id(dn))
            if why:
                return 419, {"status": "419 Authentication Timeout", "message": why}
        with self.lock:
            self.posts.append(body)
            try:
                job, files, tokens = build_job(json.loads(json.dumps(body)), vo, dn, method,
                                               self._next_file, self.token, self.tokens)
            except (Refused, KeyError, TypeError, ValueError) as exc:
                self.refused.append(str(exc))
                code, status = ((409, "409 Conflict") if isinstance(exc, Conflict) else
                                (500, "500 Internal Server Error") if isinstance(exc, Broken)
                                else (400, "400 Bad Request"))
                return code, {"status": status, "message": str(exc)}
            if job["job_id"] in self.jobs:
                self.duplicates += 1
                return 409, {"status": "409 Conflict",
                             "message": "The sid provided by the user is duplicated"}
            self.tokens.update(tokens)
            self._next_file += len(files)
            self.jobs[job["job_id"]] = job
            self.files[job["job_id"]] = files
        if self.on_submit is not None:
            self.on_submit(job)
        if self.flaky > 0:      # stored, but the client hears a 503: the job is in doubt
            self.flaky -= 1
            return 503, {"status": "503 Service Unavailable", "message": "try again"}
        return 200, {"job_id": job["job_id"]}

    def purge(self, job_id: str) -> None:
        """Forget a job, as FTS3's database clean-up does with old jobs (or another server)."""
        with self.lock:
            del self.jobs[job_id], self.files[job_id]

    def _sequence(self, job: dict[str, Any], f: dict[str, Any]) -> list[str]:
        seq = ["STAGING"] if job["bring_online"] > 0 or job["copy_pin_lifetime"] > 0 else []
        seq += ["SUBMITTED", "ACTIVE"]
        if f.get("file_state_initial"):         # a token file: the refresh token first
            seq.insert(0, "TOKEN_PREP")
        if job["archive_timeout"] > 0:
            seq.append("ARCHIVING")
        return seq + ["FINISHED"]

    def advance(self, job_id: str) -> None:
        """One step of the daemon's work on this job's files (under the lock)."""
        if self.hold:
            return
        job, now = self.jobs[job_id], time.time()
        for f in self.files[job_id]:
            if f["file_state"] in TERMINAL or f["file_state"] == "NOT_USED":
                continue
            seq = self._sequence(job, f)
            nxt = seq[seq.index(f["file_state"]) + 1]
            if nxt == "ACTIVE":
                f["start_time"] = _iso(now)
            if nxt in ("ARCHIVING", "FINISHED") and f["file_state"] == "ACTIVE":
                reason = self.fail(f)
                if reason:
                    f.update(file_state="FAILED", reason=reason, finish_time=_iso(now))
                    continue
                f.update(filesize=f["user_filesize"], tx_duration=1.0,
                         throughput=f["user_filesize"] / 1e6)
            f["file_state"] = nxt
            if nxt == "FINISHED":
                f["finish_time"] = _iso(now)
        self._job_state(job)

    def _job_state(self, job: dict[str, Any]) -> None:
        states = {f["file_state"] for f in self.files[job["job_id"]]}
        if job["job_state"] == "CANCELED" or not states <= set(TERMINAL):
            if not states <= set(TERMINAL):
                job["job_state"] = "ACTIVE" if "ACTIVE" in states or "ARCHIVING" in states \
                    else job["job_state"]
            return
        job["job_state"] = ("FINISHED" if states == {"FINISHED"} else
                            "FAILED" if "FINISHED" not in states else "FINISHEDDIRTY")
        job["job_finished"] = _iso(time.time())

    def cancel(self, job_id: str) -> tuple[int, Any]:
        job = self.jobs.get(job_id)
        if job is None:
            return 404, {"status": "404 Not Found", "message": f"No job with the id "
                                                               f"\"{job_id}\" has been found"}
        if job["job_state"] in ("FINISHED", "FAILED", "FINISHEDDIRTY", "CANCELED"):
            return 200, {**job, "http_status": "304 Not Modified"}
        job.update(job_state="CANCELED", cancel_job=True, reason="Job canceled by the user",
                   job_finished=_iso(time.time()))
        for f in self.files[job_id]:
            if f["file_state"] not in TERMINAL:
                f.update(file_state="CANCELED", reason="Job canceled by the user",
                         finish_time=_iso(time.time()))
        return 200, {**job, "http_status": "200 Ok"}


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts))
