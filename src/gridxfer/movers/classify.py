"""The one place a low-level failure becomes an ``ErrorClass``.

``classify(failure, side=...)`` understands gfal2 ``GError`` (errno codes), XRootD
``XRootDStatus`` (client codes and server ``kXR_*`` numbers), finished
``subprocess`` runs (exit status + stderr of globus-url-copy), ``OSError`` and
bare errno integers. ``side`` is ``"source"`` or ``"destination"``: ENOENT only
means SOURCE_MISSING when it is the source that is missing.
"""
from __future__ import annotations

import errno as E
import re
import subprocess
from typing import Any

from gridxfer.errors import ErrorClass, TransferError

# XRootD server error numbers (XProtocol.hh, kXR_*) -> POSIX errno.
_KXR_ERRNO = {
    3002: E.ENAMETOOLONG,  # kXR_ArgTooLong (XProtocol mapError: ENAMETOOLONG)
    3009: E.ENOSPC,      # kXR_NoSpace
    3010: E.EACCES,      # kXR_NotAuthorized
    3011: E.ENOENT,      # kXR_NotFound
    3017: E.ECANCELED,   # kXR_Cancelled
    3018: E.EEXIST,      # kXR_ItExists
    3019: E.EBADMSG,     # kXR_ChkSumErr
    3021: E.EDQUOT,      # kXR_overQuota
    3025: E.EROFS,       # kXR_fsReadOnly
    3030: E.EACCES,      # kXR_AuthFailed
    3034: E.ETIMEDOUT,   # kXR_ReqTimedOut
    3035: E.ETIMEDOUT,   # kXR_TimerExpired
}
# XrdCl client status codes (XrdClStatus.hh).
_XRDCL_CLASS = {
    101: ErrorClass.CONNECTION,  # errInvalidAddr
    102: ErrorClass.CONNECTION,  # errSocketError
    103: ErrorClass.TIMEOUT,     # errSocketTimeout
    104: ErrorClass.CONNECTION,  # errSocketDisconnected
    107: ErrorClass.CONNECTION,  # errStreamDisconnect
    108: ErrorClass.CONNECTION,  # errConnectionError
    202: ErrorClass.CONNECTION,  # errHandShakeFailed
    203: ErrorClass.PERMISSION,  # errLoginFailed
    204: ErrorClass.PERMISSION,  # errAuthFailed
    206: ErrorClass.TIMEOUT,     # errOperationExpired
    207: ErrorClass.CANCELLED,   # errOperationInterrupted
    305: ErrorClass.CHECKSUM,    # errCheckSumError
}

_BY_ERRNO = {
    E.EEXIST: ErrorClass.EXISTS,
    E.ENOSPC: ErrorClass.NO_SPACE, E.EDQUOT: ErrorClass.NO_SPACE,
    E.EACCES: ErrorClass.PERMISSION, E.EPERM: ErrorClass.PERMISSION, E.EROFS: ErrorClass.PERMISSION,
    E.ETIMEDOUT: ErrorClass.TIMEOUT,
    E.ECONNREFUSED: ErrorClass.CONNECTION, E.ECONNRESET: ErrorClass.CONNECTION,
    E.EHOSTUNREACH: ErrorClass.CONNECTION, E.ENETUNREACH: ErrorClass.CONNECTION,
    E.ECONNABORTED: ErrorClass.CONNECTION, E.EPIPE: ErrorClass.CONNECTION,
    E.EBADMSG: ErrorClass.CHECKSUM, E.EIO: ErrorClass.OTHER,
    E.ECANCELED: ErrorClass.CANCELLED, E.EINTR: ErrorClass.CANCELLED,
    E.ENAMETOOLONG: ErrorClass.BAD_NAME,     # the same name fails again: never retried
}

# Text patterns for tools that lose the errno (globus-url-copy, gfal2 ECOMM/EIO wrappers).
_PATTERNS: list[tuple[re.Pattern[str], Any]] = [
    (re.compile(r"checksum (mismatch|do not match|error)|checksum.*differ", re.I),
     ErrorClass.CHECKSUM),
    (re.compile(r"no such file|not found|does not exist|FILE_NOT_FOUND|PATH_NOT_FOUND", re.I),
     E.ENOENT),
    (re.compile(r"file exists|already exists", re.I), ErrorClass.EXISTS),
    (re.compile(r"name too long|ENAMETOOLONG", re.I), ErrorClass.BAD_NAME),
    (re.compile(r"no space|disk quota|quota exceeded", re.I), ErrorClass.NO_SPACE),
    (re.compile(r"connection refused|connection reset|no route to host|network is unreachable|"
                r"unable to connect|connection error|broken pipe|end of file", re.I),
     ErrorClass.CONNECTION),
    (re.compile(r"timed? ?out|timeout", re.I), ErrorClass.TIMEOUT),
    (re.compile(r"permission denied|not authori[sz]ed|authentication|authori[sz]ation|"
                r"credential|certificate|proxy|gss|530 ", re.I), ErrorClass.PERMISSION),
    (re.compile(r"cancel", re.I), ErrorClass.CANCELLED),
]


# Credential problems win over the errno that comes with them (gfal2 reports a missing
# proxy file as ENOENT, which must not read as "source missing").
_CREDENTIALS = re.compile(r"user certificate|proxy (certificate|file)|credential|gss_|"
                          r"globus_gsi|530 login|authentication failed|"
                          r"(certificate|proxy)[^.]*expired", re.I)


# A server's HTTP 401/403 (davs/https; gfal2/davix reports 403 as EACCES or EPERM, or only in
# its text "HTTP 403"; an XrdHttp TPC reports the remote side's in the body: "Remote side
# failed with status code 403"): the token is missing, refused or lacks a scope. Its own
# class, ``auth``, never retried as transient.
_HTTP_AUTH = re.compile(r"\bHTTP[ /]?(?:1\.[01] )?40[13]\b|status code:? 40[13]\b|"
                        r"\b40[13] (?:Forbidden|Unauthori[sz]ed)\b", re.I)


# HTTP 423 Locked: XrdHttp's answer while the file is still open for writing elsewhere
# (kXR_FileLocked), e.g. by the server-side session of an upload whose client was just
# killed, until the server notices. gfal2 hands it on as EEXIST. Its own class, ``locked``:
# retried, and not counted against the endpoint (the file is busy, the server is fine: a
# fresh-clone run saw three 423s in a row open the circuit and fail a tier's files).
_HTTP_LOCKED = re.compile(r"\bHTTP[ /]?(?:1\.[01] )?423\b|status code:? 423\b", re.I)


def _from_errno(code: int, side: str) -> ErrorClass | None:
    if code == E.ENOENT:
        return ErrorClass.SOURCE_MISSING if side == "source" else ErrorClass.OTHER
    return _BY_ERRNO.get(code)


def _from_text(text: str, side: str) -> ErrorClass:
    for pattern, result in _PATTERNS:
        if pattern.search(text):
            if isinstance(result, int):
                return _from_errno(result, side) or ErrorClass.OTHER
            return result
    return ErrorClass.OTHER


def _parts(failure: Any) -> tuple[int | None, str, ErrorClass | None]:
    """(errno or None, message, class decided by a protocol code or None)."""
    if isinstance(failure, int):
        return failure, "", None
    if isinstance(failure, subprocess.CompletedProcess | subprocess.CalledProcessError):
        text = (failure.stderr or "") + " " + (failure.stdout or "")
        if isinstance(text, bytes):
            text = text.decode(errors="replace")
        return None, text, None
    if isinstance(failure, OSError) and failure.errno is not None:
        return failure.errno, str(failure), None
    # XRootD status objects: .code (client), .errno (server kXR_* or POSIX), .message
    if hasattr(failure, "shellcode") and hasattr(failure, "code"):
        message = str(getattr(failure, "message", failure))
        code, num = int(failure.code), int(getattr(failure, "errno", 0) or 0)
        if num == 3003:                     # kXR_FileLocked: another session has it open
            return None, message, ErrorClass.LOCKED
        if num in _KXR_ERRNO:
            return _KXR_ERRNO[num], message, None
        if code in _XRDCL_CLASS:
            return None, message, _XRDCL_CLASS[code]
        return (num if 0 < num < 3000 else None), message, None
    # gfal2.GError: .code is errno, .message the text
    if hasattr(failure, "code") and hasattr(failure, "message"):
        return int(failure.code or 0) or None, str(failure.message), None
    return None, str(failure), None


def classify(failure: Any, *, side: str = "source") -> ErrorClass:
    """Map a gfal2 GError, XRootD status, subprocess result, OSError or errno to an ErrorClass."""
    code, text, decided = _parts(failure)
    if decided is not None:
        return decided
    if _HTTP_AUTH.search(text):
        return ErrorClass.AUTH
    if _HTTP_LOCKED.search(text):
        return ErrorClass.LOCKED
    if _CREDENTIALS.search(text):
        return ErrorClass.PERMISSION
    if code is not None:
        by_code = _from_errno(code, side)
        if by_code is not None and not (by_code is ErrorClass.OTHER and text):
            return by_code
    return _from_text(text, side)


def one_line(text: str, limit: int = 300) -> str:
    """Collapse a multi-line tool message into one line of at most ``limit`` characters.
    A longer one has its long words (URLs and paths: a long file name may come three
    times) shortened in their middle first, then loses its own middle: the start of the
    context and the reason, which tools write last ("File name too long"), stay."""
    words = str(text).split()
    flat = " ".join(words)
    if len(flat) <= limit:
        return flat
    flat = " ".join(_short(w) for w in words)
    if len(flat) <= limit:
        return flat
    head = limit // 3
    return flat[:head] + " ... " + flat[len(flat) - (limit - head - 5):]


_WORD = 80          # a word (URL, path) longer than this keeps its first 40 and last 30


def _short(word: str) -> str:
    return word if len(word) <= _WORD else word[:40] + "..." + word[-30:]


def transfer_error(failure: Any, what: str, *, side: str = "source") -> TransferError:
    """A TransferError for ``failure`` with ``what`` (e.g. the URL) as context."""
    cls = classify(failure, side=side)
    _, text, _ = _parts(failure)
    return TransferError(cls, one_line(f"{what}: {text or failure}"))
