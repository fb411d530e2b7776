"""FTS3's file states and failure reasons in gridxfer's terms (the journal's states, the
attempts' statuses, ``ErrorClass``).

FTS3 file states (fts3's ``FileActiveStates`` and terminal ones): STAGING, ARCHIVING,
SUBMITTED, READY, ACTIVE, ON_HOLD, ON_HOLD_STAGING, TOKEN_PREP, SELECTED, NOT_USED,
QOS_TRANSITION, QOS_REQUEST_SUBMITTED; FINISHED, FAILED, CANCELED. A reason reads like
``DESTINATION [28] ... No space left on device`` or ``SOURCE [2] ... No such file``: the
side, an errno in brackets, the storage's text.
"""
from __future__ import annotations

import errno
import re
from dataclasses import dataclass

from gridxfer.errors import ErrorClass
from gridxfer.movers.classify import classify

TERMINAL = frozenset({"FINISHED", "FAILED", "CANCELED"})
JOB_TERMINAL = frozenset({"FINISHED", "FAILED", "FINISHEDDIRTY", "CANCELED"})
_JOURNAL = {"STAGING": "staging", "ON_HOLD_STAGING": "staging", "ARCHIVING": "archiving",
            "FINISHED": "done", "FAILED": "failed", "CANCELED": "failed"}
_REASON = re.compile(r"\s*(SOURCE|DESTINATION|TRANSFER|STAGING|ARCHIVING|"
                     r"TRANSFER-PREPARATION|DESTINATION-OVERWRITE|CHECKSUM)?\s*"
                     r"(?:\[(\d+)\])?", re.I)


@dataclass(frozen=True)
class FileNews:
    """What one poll says of one file."""
    file_id: int                # the journal's id (from the file's metadata)
    state: str                  # FTS3's
    reason: str | None
    bytes: int
    started: float | None
    ended: float | None


def journal_state(fts_state: str) -> str:
    """The ``files.state`` for an FTS3 file state (everything in flight is ``active``)."""
    return _JOURNAL.get(fts_state, "active")


def attempt_status(fts_state: str) -> str:
    return {"FINISHED": "ok", "FAILED": "failed", "CANCELED": "cancelled"}.get(
        fts_state, "active")


def error_class(reason: str | None, *, was: str | None = None,
                canceled: bool = False) -> ErrorClass:
    """The ErrorClass of an FTS3 failure. ``was``: the state the file failed from, when
    the poller saw it (a file failing while STAGING or ARCHIVING failed on tape)."""
    if canceled:
        return ErrorClass.CANCELLED
    text = reason or ""
    m = _REASON.match(text)
    side_word = (m.group(1) or "").upper() if m else ""
    if side_word == "STAGING" or was in ("STAGING", "ON_HOLD_STAGING"):
        return ErrorClass.STAGING
    if side_word == "ARCHIVING" or was == "ARCHIVING":
        return ErrorClass.ARCHIVE_TIMEOUT
    if side_word == "CHECKSUM" or re.search(r"checksum", text, re.I):
        return ErrorClass.CHECKSUM
    side = "destination" if side_word.startswith("DESTINATION") else "source"
    code = int(m.group(2)) if m and m.group(2) else None
    if code is not None and code in errno.errorcode:
        return classify(OSError(code, text), side=side)
    return classify(text, side=side)
