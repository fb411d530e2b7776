"""A generic JSON-lines source of tape (or any sink) sessions, one object per line::

    {"end": 1763732701.5, "bytes": 21474836480, "duration": 1193.0, "drive": "D1",
     "vid": "V001", "kind": "archive", "files": 10, "ok": true}

``end`` (or ``ts``/``time``) is unix seconds; ``duration`` seconds, or ``rate_MBps``
instead (duration = bytes / rate). ``drive`` (or ``unit``) names the unit. ``kind`` says
what the session did: absent or one of :data:`WRITE_KINDS` is a write and counts in the
write rate; anything else (``read``, ``retrieve``, ``restore``, ``stage`` ...) is not.
``ok: false`` marks a failed session; ``"event": "down"`` / ``"up"`` (with ``drive`` and
``end``, no ``bytes``) puts a drive down or up. Lines that are not JSON objects are
unparsable; objects without ``bytes`` (and not an event) are ignored.
"""
from __future__ import annotations

import json
from pathlib import Path

from gridxfer.monitoring.sources.tapelog import TapeSession
from gridxfer.monitoring.sources.taperead import LogSource, TapeLogs

WRITE_KINDS = frozenset({"", "write", "archive", "store", "migration", "flush",
                         "ArchiveForUser", "ArchiveForRepack"})


def parse(line: str, path: Path) -> TapeSession | None:
    obj = json.loads(line)
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    if "bytes" not in obj and obj.get("event") not in ("down", "up"):
        return None
    raw_end = obj.get("end", obj.get("ts", obj.get("time")))
    if raw_end is None:
        raise ValueError("no end, ts or time")
    end = float(raw_end)
    if end != end:
        raise ValueError("end is not a number")
    unit = str(obj.get("drive", obj.get("unit", "?")))
    if obj.get("event") in ("down", "up") and "bytes" not in obj:
        return TapeSession(end=end, duration=0.0, bytes=0, unit=unit, event=obj["event"],
                           write=False)
    nbytes = int(obj["bytes"])
    if "duration" in obj:
        duration = float(obj["duration"])
    else:
        duration = nbytes / (float(obj["rate_MBps"]) * 1e6)
    if nbytes < 0 or not 0 <= duration < 30 * 86400:
        raise ValueError("negative bytes or bad duration")
    kind = str(obj.get("kind", ""))
    return TapeSession(end=end, duration=duration, bytes=nbytes, unit=unit,
                       vid=str(obj.get("vid", "")), files=int(obj.get("files", 0)),
                       kind=kind, ok=bool(obj.get("ok", True)), write=kind in WRITE_KINDS)


def source(paths: list[Path], *, cookie: Path | None = None) -> TapeLogs:
    """JSON-lines files as a MonitoringSource (see :class:`.taperead.TapeLogs`)."""
    return TapeLogs(tuple(LogSource(Path(p), parse, "jsonl") for p in paths), cookie,
                    kind="jsonl")
