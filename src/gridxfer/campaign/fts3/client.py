"""The official FTS3 REST client (PyPI ``fts3``: ``fts3.rest.client.easy``) behind the few
calls the engine makes, with its exceptions turned into gridxfer's errors.

Authentication as FTS3 users do: a bearer token (``fts3.token``: sent as
``Authorization``, never in argv, logs or the journal), or an X.509 proxy
(``fts3.proxy``, else the client's own rules: X509_USER_PROXY, /tmp/x509up_u<uid>),
delegated to the server by ``easy.submit`` when the server has none or too short a one.
"""
from __future__ import annotations

import json
import logging
import re

from dataclasses import asdict
from typing import Any

from gridxfer.auth.sources import read_token, source_from
from gridxfer.auth.tokens import Token, TokenError
from gridxfer.campaign.fts3 import official
from gridxfer.campaign.spec.model import EngineSpec
from gridxfer.errors import GridxferError, UsageError
from gridxfer.redact import redact

log = logging.getLogger(__name__)
# the per-file fields a poll asks for (GET /jobs/<ids>?files=...)
POLL_FIELDS = ("file_id", "file_state", "reason", "start_time", "finish_time", "filesize",
               "user_filesize", "tx_duration", "throughput", "dest_surl", "file_metadata")
MAX_IDS = 50                    # job ids per status request
MAX_TEXT = 300                  # characters of a server's text in an error line
# fts-rest-flask's answer for an id it has no job for (jobs.get, as a 404 entry)
NO_JOB = re.compile(r'No job with the id "([^"]+)" has been found')


class Fts3Error(GridxferError):
    """The FTS3 server refused or failed a request (exit 1; a refusal of bad input: 2)."""


class NotFound(Fts3Error):
    pass


class Conflict(Fts3Error):
    """HTTP 409: the server has a job with this id already (the client says only "409")."""


class Transient(Fts3Error):
    """The server did not answer, or answered 5xx: try again later (the engine does)."""


def _error(exc: Exception, what: str) -> GridxferError:
    import requests  # here: 30 ms of every local-engine start otherwise (official.py)

    text = redact(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT] + "..."
    if isinstance(exc, official.errors().NotFound):
        return NotFound(f"FTS3 {what}: not found")
    if isinstance(exc, official.errors().ServerError | requests.ConnectionError | requests.Timeout):
        return Transient(f"FTS3 {what}: {text}")
    if isinstance(exc, official.errors().ClientError) and text.rsplit(" ", 1)[-1] == "409":
        return Conflict(f"FTS3 {what}: 409 Conflict (a job with this id exists)")
    if isinstance(exc, official.errors().ClientError) and "Bad request" in text:
        return UsageError(f"FTS3 refused the {what}: {text}")
    return Fts3Error(f"FTS3 {what}: {text}")


def access_token(engine: EngineSpec) -> Token | None:
    """The FTS3 token of ``fts3.token`` (None without one); a bad one is a UsageError, so
    ``run`` calls this before planning too (nothing journalled for a run that is refused)."""
    if not engine.endpoint:
        raise UsageError("engine fts3 needs an endpoint: fts3: {endpoint: URL} or --fts3 URL")
    if engine.token is None:
        return None
    try:
        return read_token(source_from({k: v for k, v in asdict(engine.token).items()
                                       if k in ("file", "env", "command", "timeout") and v}))
    except TokenError as exc:
        raise UsageError(f"fts3.token: {exc}") from None


UNREAD = object()               # Fts3Client's token not read yet (None: no ``fts3.token``)


class Fts3Client:
    def __init__(self, engine: EngineSpec, token: Token | None | object = UNREAD) -> None:
        """``token``: ``fts3.token`` as `run` read it before the plan, so that a
        ``command:`` source runs once a run (UNREAD: read it here, as `resume` does)."""
        if token is UNREAD:
            token = access_token(engine)
        assert token is None or isinstance(token, Token)
        try:
            self.context = official.easy().Context(
                engine.endpoint, ucert=engine.proxy, ukey=engine.proxy,
                fts_access_token=token.value if token else None, timeout=60)
        except Exception as exc:  # noqa: BLE001  (the client raises bare Exception too)
            raise _error(exc, f"endpoint {engine.endpoint}") from None
        self.endpoint = engine.endpoint
        # what fts-rest puts on both sides of a token user's job without token lists; it
        # also fills the side without a ``token:`` (never logged, never journalled)
        self.access_token: str | None = token.value if token else None
        self._vo: str | None = None

    def vo(self) -> str:
        """The VO the server files this user's jobs under (the deterministic ids use it)."""
        if self._vo is None:
            who = self._call(official.easy().whoami, "whoami")
            self._vo = str((who.get("vos") or [""])[0])
        return self._vo

    def _call(self, fn: Any, what: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self.context, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001  (the client raises bare Exception too)
            raise _error(exc, what) from None

    def submit(self, job: dict[str, Any]) -> str:
        return str(self._call(official.easy().submit, "submission", job))

    def job(self, job_id: str) -> dict[str, Any] | None:
        """The job, or None when the server has none with that id."""
        try:
            return dict(self._call(official.easy().get_job_status, f"job {job_id}", job_id))
        except NotFound:
            return None

    def statuses(self, job_ids: list[str]) -> list[dict[str, Any]]:
        """Jobs with their files' POLL_FIELDS, MAX_IDS ids per request. A job the server
        does not know comes back as fts-rest-flask's entry for it: ``{"job_id",
        "http_status": "404 Not Found", "http_message"}``."""
        out: list[dict[str, Any]] = []
        for start in range(0, len(job_ids), MAX_IDS):
            out.extend(self._statuses(job_ids[start:start + MAX_IDS]))
        return out

    def _statuses(self, ids: list[str]) -> list[dict[str, Any]]:
        """One GET /jobs/<ids>?files=... fts-rest-flask answers an unknown id with 404 (one
        id) or 207 (several, a list with a 404 entry for it); the official client raises
        NotFound, or ClientError whose ``reason`` is the 207 body (when some jobs were
        found) or the entries' messages, one per line (when none was)."""
        path = f"/jobs/{','.join(ids)}?files={','.join(POLL_FIELDS)}"
        try:
            reply = json.loads(self.context.get(path))
        except official.errors().NotFound:
            if len(ids) != 1:
                raise _error(official.errors().ClientError("404"), "status") from None
            return [_no_job(ids[0])]
        except official.errors().ClientError as exc:
            reply = _multistatus(exc, ids)
            if reply is None:
                raise _error(exc, "status") from None
        except Exception as exc:  # noqa: BLE001
            raise _error(exc, "status") from None
        return reply if isinstance(reply, list) else [reply]

    def cancel(self, job_ids: list[str]) -> int:
        """Cancel the jobs still running; returns how many the server cancelled."""
        done = 0
        for job_id in job_ids:
            try:
                reply = self._call(official.easy().cancel, f"cancel of {job_id}", job_id)
            except NotFound:
                continue
            if isinstance(reply, dict) and reply.get("job_state") == "CANCELED":
                done += 1
        return done


def _no_job(job_id: str) -> dict[str, Any]:
    return {"job_id": job_id, "http_status": "404 Not Found",
            "http_message": f'No job with the id "{job_id}" has been found'}


def _multistatus(exc: Exception, ids: list[str]) -> list[dict[str, Any]] | None:
    """The entries of a 207 the official client raised as ClientError, or None if the
    error is something else."""
    reason = getattr(exc, "reason", None)
    if not isinstance(reason, str):
        return None
    try:
        body = json.loads(reason)
    except ValueError:
        body = None
    if isinstance(body, list) and all(isinstance(e, dict) and "job_id" in e for e in body):
        return body
    lines = [line for line in reason.splitlines() if line.strip()]
    missing = [m.group(1) if m else None for m in map(NO_JOB.fullmatch, lines)]
    if lines and None not in missing and set(missing) == set(ids):
        return [_no_job(str(j)) for j in missing]
    return None
