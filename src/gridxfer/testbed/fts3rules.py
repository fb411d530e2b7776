"""The FTS3 STAND-IN's submission rules: what fts-rest-flask's ``JobBuilder`` checks and
stores for a transfer job (src/fts3rest/fts3rest/lib/JobBuilder.py and
JobBuilder_utils.py, read at the mirrored HEAD; none of its code is copied).

``build_job(body, vo, ...)`` returns the stored job, its files and the ``t_token`` rows
(claims only: the stand-in keeps no token), or raises ``Refused`` with the message
fts-rest answers (HTTP 400), ``Conflict`` (409) or ``Broken`` (500).

Per-file tokens as fts-rest-flask 3.13.4 treats them (read there, then measured on it with
MariaDB, docs/fts3.md): a token user's (``oauth2``) job without token lists gets the
submitter's token on both sides; with lists, both are needed, one per source/destination,
each a JWT with iss, nbf, exp, scope and aud, and such a job may not stage from or archive
to tape; its files wait in TOKEN_PREP (no refresh token yet). A certificate user's tokens
are not stored: its files' token ids then break ``t_file``'s foreign key (409) unless a
token user sent that token before. Written from the server's source, independently of
gridxfer's own mapping (``campaign/fts3``), so a test of one against the other means
something. Not an FTS3 server: only what gridxfer submits and polls.
"""
from __future__ import annotations

import base64
import hashlib
import itertools
import json
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

BASE_ID = uuid.UUID("urn:uuid:01874efb-4735-4595-bc9c-591aef8240c9")   # fts-rest's BASE_ID
# Job/FileMetadataSizeLimit of the fts3restconfig fts-rest ships (the code's fallback: 1024)
JOB_METADATA_LIMIT, FILE_METADATA_LIMIT = 2048, 4096
DEFAULTS: dict[str, Any] = {   # fts-rest's DEFAULT_PARAMS (the transfer ones)
    "bring_online": -1, "archive_timeout": -1, "verify_checksum": False,
    "copy_pin_lifetime": -1, "job_metadata": None, "overwrite": False,
    "overwrite_on_retry": False, "overwrite_when_only_on_disk": False, "overwrite_hop": False,
    "reuse": None, "multihop": False, "retry": 0, "retry_delay": 0, "priority": 3,
    "max_time_in_queue": 0}


class Refused(Exception):
    """fts-rest's BadRequest: HTTP 400 with this message."""


class Conflict(Refused):
    """fts-rest's Conflict: HTTP 409 (an IntegrityError on insert)."""


class Broken(Refused):
    """An exception fts-rest does not turn into a BadRequest: HTTP 500."""


def _int(value: Any, default: int = -1) -> int:      # fts-rest's safe_int
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _flag(value: Any) -> bool:                         # fts-rest's safe_flag
    if isinstance(value, str):
        return value.lower() in ("true", "1", "yes")
    return bool(value)


def _validate_url(url: str) -> None:
    parts = urlsplit(url.strip())
    if not parts.scheme:
        raise Refused(f"Invalid value within the request: Missing scheme ({url})")
    if parts.scheme == "file":
        raise Refused(f"Invalid value within the request: Can not transfer local files ({url})")
    if not parts.path or (parts.path == "/" and not parts.query):
        raise Refused(f"Invalid value within the request: Missing path ({url})")
    if not parts.hostname:
        raise Refused(f"Invalid value within the request: Missing host ({url})")


def _metadata(data: Any, limit: int, what: str = "Metadata") -> dict[str, Any]:
    if len(json.dumps(data)) > limit:
        raise Refused(f"Invalid value within the request: Job Submission Refused, {what.lower()}"
                      f" exceeds size limit of {limit}")
    if isinstance(data, dict):
        return data
    if isinstance(data, str):
        return {"label": data}
    raise Refused(f"Invalid value within the request: {what} neither JSON nor String")


def _se(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}"


def _overwrite_flag(p: dict[str, Any]) -> str:
    flags = [_flag(p[k]) for k in ("overwrite", "overwrite_on_retry",
                                  "overwrite_when_only_on_disk", "overwrite_hop")]
    if sum(flags) > 1 and not (sum(flags) == 2 and flags[2] and flags[3]):
        raise Refused("Incompatible overwrite flags used at the same time")
    if flags[2] and _int(p["archive_timeout"]) <= 0:
        raise Refused("'overwrite-when-only-on-disk' requires 'archive-timeout' to be set")
    if flags[0]:
        return "Y"
    if flags[1]:
        return "R"
    if flags[3] and flags[2]:
        return "Q"
    if flags[3]:
        return "M"
    return "D" if flags[2] else "N"


def job_id_of(params: dict[str, Any], vo: str) -> str:
    if params.get("id_generator", "standard") != "deterministic":
        return str(uuid.uuid1())
    sid = params.get("sid")
    if sid is None:
        raise Refused("Need sid for deterministic job id generation")
    return str(uuid.uuid5(uuid.uuid5(BASE_ID, vo), str(sid)))


def token_id(token: Any) -> str | None:
    """fts-rest's ``generate_token_id``: a token's id (``t_token.token_id``, char(16))."""
    if token is None:
        return None
    if not isinstance(token, str):
        raise Broken(f"token does not have the encode() method: type(token) = {type(token)}")
    return hashlib.sha1(token.encode()).hexdigest()[:16]  # nosec


CLAIMS = ("iss", "nbf", "exp", "scope", "aud")      # JobBuilder._populate_tokens


def _claims(token: str) -> dict[str, Any]:
    parts = token.split(".")
    try:
        if len(parts) < 3:
            raise ValueError
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        payload = {}
    for claim in CLAIMS:
        if claim not in payload:
            raise Refused(f"Token does not contain a{'n' if claim[0] in 'aei' else ''} "
                          f"{claim} claim")
    return {k: payload[k] for k in CLAIMS}


def token_rows(files_in: list[dict[str, Any]], bearer: str | None, params: dict[str, Any]
               ) -> dict[str, dict[str, Any]]:
    """A token user's job (``oauth2``): JobBuilder's single-token fill-in and
    ``_validate_transfer_tokens``, then the t_token rows (id -> claims) and the tape
    refusals of the jobs controller. Mutates ``files_in`` as the server does."""
    if not any("source_tokens" in e or "destination_tokens" in e for e in files_in):
        for e in files_in:
            e["source_tokens"] = [bearer] * len(e["sources"])
            e["destination_tokens"] = [bearer] * len(e["destinations"])
    for e in files_in:
        src, dst = e.get("source_tokens", []), e.get("destination_tokens", [])
        if not (src or dst):
            continue
        if not (src and dst):
            raise Refused("Both source_tokens and destination_tokens are required if one of "
                          "them is present.")
        for key, urls, side in (("source_tokens", "sources", "source"),
                                ("destination_tokens", "destinations", "destination")):
            if len(e[key]) != len(e[urls]):
                raise Refused(f"Length of {key} should be equal to the length of {urls}.")
            for url, tok in zip(e[urls], e[key], strict=True):
                if not tok:
                    raise Refused(f"Token for {side} '{url}' is missing.")
    rows: dict[str, str] = {}
    for e in files_in:
        for tok in [*e.get("source_tokens", []), *e.get("destination_tokens", [])]:
            tid = token_id(tok)
            assert tid is not None
            rows[tid] = tok
    out = {tid: _claims(tok) for tid, tok in rows.items()}
    if _int(params["archive_timeout"]) > 0:
        raise Refused("Requests to archive to tape using token authentication are not "
                      "supported")
    if _int(params["bring_online"]) > 0:
        raise Refused("Requests to retrieve from tape using token authentication are not "
                      "supported")
    return out


def _tokens(entry: dict[str, Any], key: str, urls: str, what: str) -> list[Any]:
    """JobBuilder's per-file token list: strings, at most one per source/destination (a
    longer list reaches ``urlparse(None)`` there: a 500; refused here)."""
    tokens = entry.get(key, [])
    if not isinstance(tokens, list):
        raise Refused(f"{key} is not a list")
    if len(tokens) > len(entry[urls]):
        raise Refused(f"more {key} than {urls}")
    for t in tokens:
        if t is not None and not isinstance(t, str):
            raise Refused(f"{what} token is not a string: type={type(t).__name__}")
    return tokens


def build_job(body: dict[str, Any], vo: str, user_dn: str, method: str, next_file_id: int,
              bearer: str | None = None, known: Any = frozenset()
              ) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The job, file and t_token rows fts-rest would store for ``body`` (or ``Refused``);
    ``bearer``: a token user's own token, ``known``: the token ids stored already."""
    if body.get("delete"):
        raise Refused("Deletion jobs are no longer supported by FTS")
    files_in = body.get("files")
    if not files_in:
        raise Refused("No transfers operations specified")
    params = {**DEFAULTS, **body.get("params", {})}
    for k, v in list(params.items()):
        if v is None and k in DEFAULTS:
            params[k] = DEFAULTS[k]
    if params["job_metadata"] is not None:
        params["job_metadata"] = _metadata(params["job_metadata"], JOB_METADATA_LIMIT)
    job_id = job_id_of(params, vo)
    job_type = "H" if _flag(params["multihop"]) else ("Y" if _flag(params["reuse"]) else "N")
    staging = _int(params["copy_pin_lifetime"]) > 0 or _int(params["bring_online"]) > 0
    overwrite = _overwrite_flag(params)
    if overwrite in ("M", "Q") and job_type != "H":
        raise Refused("'overwrite-hop' requires multihop job submission")
    state = "STAGING" if staging else "SUBMITTED"
    tokens = token_rows(files_in, bearer, params) if method == "oauth2" else {}
    files: list[dict[str, Any]] = []
    for entry in files_in:
        src_tokens = _tokens(entry, "source_tokens", "sources", "Source")
        dst_tokens = _tokens(entry, "destination_tokens", "destinations", "Destination")
        for src, src_token in itertools.zip_longest(entry["sources"], src_tokens):
            _validate_url(src)
            for dst, dst_token in itertools.zip_longest(entry["destinations"], dst_tokens):
                _validate_url(dst)
                meta = entry.get("metadata")
                files.append({
                    "file_id": next_file_id + len(files), "job_id": job_id,
                    "file_state": "NOT_USED" if job_type == "H" and files else state,
                    "source_surl": src, "dest_surl": dst, "source_se": _se(src),
                    "dest_se": _se(dst), "activity": entry.get("activity") or "default",
                    "user_filesize": _int(entry.get("filesize"), 0), "filesize": 0,
                    "checksum": entry.get("checksum") or "ADLER32",
                    "file_metadata": None if meta is None else _metadata(
                        meta, FILE_METADATA_LIMIT),
                    "src_token_id": token_id(src_token),
                    "dst_token_id": token_id(dst_token), "file_state_initial": None,
                    "reason": None, "start_time": None, "finish_time": None,
                    "throughput": None, "tx_duration": None})
    if not files:
        raise Refused("No valid pairs available")
    for f in files:
        ids = {f["src_token_id"], f["dst_token_id"]} - {None}
        if method != "oauth2" and ids - set(known):
            raise Conflict("The submission is duplicated (MySQLdb.IntegrityError) (1452, "
                           "'Cannot add or update a child row: a foreign key constraint "
                           "fails (t_file, CONSTRAINT src_token_id/dst_token_id FOREIGN KEY "
                           "REFERENCES t_token (token_id))')")
        if method == "oauth2" and ids and f["file_state"] != "NOT_USED":
            f.update(file_state_initial=f["file_state"], file_state="TOKEN_PREP")
    has_checksum = False        # fts-rest's _check_checksum: the last file given one decides
    for entry in files_in:
        if entry.get("checksum") is not None:
            has_checksum = len(entry["checksum"]) > 0
    method_ = params["verify_checksum"]
    if isinstance(method_, bool):
        method_ = "target" if (not method_ and has_checksum) else ("none" if not method_
                                                                    else "both")
    if method_ not in ("source", "target", "both", "none"):
        raise Refused("Invalid value within the request: verify_checksum")
    source_ses = {f["source_se"] for f in files}
    dest_ses = {f["dest_se"] for f in files}
    if job_type == "Y" and (len(source_ses) > 1 or len(dest_ses) > 1):
        raise Refused("Reuse jobs must only contain transfers for the same source ad "
                      "destination storage")
    metadata = params["job_metadata"]
    metadata = {**(metadata or {}), "auth_method": method}
    job = {
        "job_id": job_id, "job_state": state, "job_type": job_type,
        "retry": _int(params["retry"]), "retry_delay": _int(params["retry_delay"]),
        "priority": max(min(_int(params["priority"], 3), 5), 1),
        "verify_checksum": method_[0], "overwrite_flag": None if overwrite == "N" else overwrite,
        "bring_online": _int(params["bring_online"]),
        "copy_pin_lifetime": _int(params["copy_pin_lifetime"]),
        "archive_timeout": _int(params["archive_timeout"]),
        "job_metadata": metadata, "user_dn": user_dn, "vo_name": vo,
        "source_se": source_ses.pop() if len(source_ses) == 1 else None,
        "dest_se": dest_ses.pop() if len(dest_ses) == 1 else None,
        "submit_time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()),
        "job_finished": None, "reason": None, "cancel_job": False,
        "internal_job_params": f"nostreams:{_int(params.get('nostreams'), 1)}"
        if params.get("nostreams") else None}
    return job, files, tokens
