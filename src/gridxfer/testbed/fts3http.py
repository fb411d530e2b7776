"""The FTS3 stand-in's HTTP side (``fts3standin`` holds its jobs): fts-rest's paths and
replies, bulk status and cancel with its 207s and 404s, and who is asking: the bearer
token, else the TLS client certificate or proxy, whose DN names its delegation
(``fts3delegation``)."""
from __future__ import annotations

import json
import re
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from gridxfer.testbed.fts3delegation import DelegationError, delegation_id, user_dn

if TYPE_CHECKING:
    from gridxfer.testbed.fts3standin import StandIn

TOKEN_DN = "/DC=org/DC=gridxfer/CN=standin"

_JOBS = re.compile(r"/jobs/([0-9a-f,-]+)(/files)?")
_DLG = re.compile(r"/delegation/([0-9a-f]+)(/request|/credential)?")


class Handler(BaseHTTPRequestHandler):
    owner: StandIn

    def log_message(self, fmt: str, *args: Any) -> None:      # quiet
        pass

    def _reply(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:         # the client is gone (a test killed it)
            pass

    def _authorized(self) -> bool:
        """Sets ``self.method`` and ``self.dn`` (a token, else a client certificate)."""
        if self.headers.get("Authorization") == f"Bearer {self.owner.token}":
            self.method, self.dn = "oauth2", TOKEN_DN
            return True
        getpeercert = getattr(self.connection, "getpeercert", None)
        der = getpeercert(binary_form=True) if getpeercert else None
        if der:
            self.method, self.dn = "certificate", user_dn(der)
            return True
        self._reply(401, {"status": "401 Unauthorized", "message": "no valid credentials"})
        return False

    def _delegation(self, path: str) -> bool:
        """GET /delegation/<id>[/request]; False if not a delegation path."""
        m = _DLG.fullmatch(path)
        if not m:
            return False
        if m.group(1) != delegation_id(self.dn):
            self._reply(403, {"status": "403 Forbidden",
                              "message": "The requested ID and the credentials ID do not match"})
        elif m.group(2) == "/request":
            data = self.owner.delegations.request(m.group(1)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        else:
            self._reply(200, self.owner.delegations.info(m.group(1)))
        return True

    def do_PUT(self) -> None:
        if not self._authorized():
            return
        m = _DLG.fullmatch(self.path)
        if not m or m.group(2) != "/credential" or m.group(1) != delegation_id(self.dn):
            return self._reply(404, {"status": "404 Not Found", "message": self.path})
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            self.owner.delegations.put(m.group(1), body)
        except DelegationError as exc:
            return self._reply(400, {"status": "400 Bad Request", "message": str(exc)})
        self._reply(201, None)

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        path, query = parts.path.rstrip("/") or "/", parse_qs(parts.query)
        if path == "/":
            return self._reply(200, {"api": {"major": 3, "minor": 14, "patch": 0},
                                     "standin": "gridxfer's FTS3 stand-in, not FTS3"})
        if not self._authorized():
            return None
        o = self.owner
        if path == "/whoami":
            dlg = delegation_id(self.dn)
            return self._reply(200, {"user_dn": self.dn, "method": self.method,
                                     "vos": [o.vo if self.method == "oauth2" else dlg],
                                     "delegation_id": dlg})
        if self._delegation(path):
            return None
        if path == "/jobs":
            with o.lock:
                jobs = [j for j in o.jobs.values() if j["job_finished"] is None]
            return self._reply(200, jobs)
        m = _JOBS.fullmatch(path)
        if not m:
            return self._reply(404, {"status": "404 Not Found", "message": path})
        if o.flaky > 0:
            o.flaky -= 1
            return self._reply(503, {"status": "503 Service Unavailable", "message": "later"})
        fields = query.get("files", [""])[0].split(",") if "files" in query else []
        # as fts-rest-flask's jobs.get: a list unless ONE id ("<id>," is two); 404/207
        raw = m.group(1).split(",")
        ids = [i for i in raw if i]
        with o.lock:
            out: list[Any] = []
            for job_id in ids:
                if job_id not in o.jobs:
                    out.append({"job_id": job_id, "http_status": "404 Not Found",
                                "http_message": f"No job with the id \"{job_id}\" has been "
                                                f"found"})
                    continue
                o.advance(job_id)
                if m.group(2):
                    return self._reply(200, [dict(f) for f in o.files[job_id]])
                job = {**o.jobs[job_id], "http_status": "200 Ok"}
                if fields:
                    job["files"] = [{k: f[k] for k in fields if k in f}
                                    for f in o.files[job_id]]
                out.append(job)
        missing = [j for j in out if j["http_status"].startswith("404")]
        if len(raw) == 1:
            return self._reply(404 if missing else 200, out[0])
        return self._reply(207 if missing else 200, out)

    def do_POST(self) -> None:
        if not self._authorized():
            return
        if self.path.rstrip("/") != "/jobs":
            return self._reply(404, {"status": "404 Not Found", "message": self.path})
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length))
        except ValueError as exc:
            return self._reply(400, {"status": "400 Bad Request", "message": str(exc)})
        self._reply(*self.owner.submit(body, self.method, self.dn))

    def do_DELETE(self) -> None:
        if not self._authorized():
            return
        m = _JOBS.fullmatch(self.path.rstrip("/"))
        if not m or m.group(2):
            return self._reply(404, {"status": "404 Not Found", "message": self.path})
        raw = m.group(1).split(",")
        with self.owner.lock:
            replies = [self.owner.cancel(i) for i in raw if i]
        if len(raw) == 1:
            return self._reply(*replies[0])
        self._reply(207 if any(c != 200 for c, _ in replies) else 200, [r for _, r in replies])
