"""A generic JSON-lines source of tape (or any sink) sessions, one object per line::

    {"end": 1763732701.5, "bytes": 21474836480, "duration": 1193.0, "drive": "D1",
     "vid": "V001", "kind": "archive", "files": 10, "ok": true}

``end`` (or ``ts``/``time``) is unix seconds; ``duration`` seconds, or ``rate_MBps``
instead (duration = bytes / rate). ``drive`` (or ``unit``) names the unit. Lines that
are not JSON objects are counted as garbage; objects without ``bytes`` are ignored.
"""
from __future__ import annotations

import json
from pathlib import Path

from .tapelog import TapeSession


def parse(line: str, path: Path) -> TapeSession | None:
    obj = json.loads(line)
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    if "bytes" not in obj:
        return None
    end = float(obj.get("end", obj.get("ts", obj.get("time"))))
    nbytes = int(obj["bytes"])
    if "duration" in obj:
        duration = float(obj["duration"])
    else:
        duration = nbytes / (float(obj["rate_MBps"]) * 1e6)
    if nbytes < 0 or not 0 < duration < 30 * 86400 or end != end:
        return None
    return TapeSession(end=end, duration=duration, bytes=nbytes,
                       unit=str(obj.get("drive", obj.get("unit", "?"))),
                       vid=str(obj.get("vid", "")), files=int(obj.get("files", 0)),
                       kind=str(obj.get("kind", "")), ok=bool(obj.get("ok", True)))
