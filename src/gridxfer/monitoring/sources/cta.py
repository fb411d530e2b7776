"""CTA ``cta-taped`` logs: "Tape session finished" events, key="value" text or JSON.

Text (CTA's default, usually behind a syslog or ISO timestamp)::

    2026-11-21T13:45:01.123456+00:00 tpsrv01 cta-taped: LVL="INFO" PID="41" TID="41"
      MSG="Tape session finished" tapeDrive="LTO9-01" tapeVid="L90001"
      mountType="ArchiveForUser" status="success" dataVolume="64424509440"
      filesCount="30" totalTime="3812.5" driveTransferSpeedMBps="18.1"
      payloadTransferSpeedMBps="18.0" ...

JSON (``log format json``): one object per line with ``"message": "Tape session
finished"``, ``"epoch_time"`` and the same fields (numbers or strings).

Rate basis: ``payload`` (payloadTransferSpeedMBps, user data only), ``drive``
(driveTransferSpeedMBps, with tape headers) or ``session`` (dataVolume / totalTime, with
mount and positioning). MB are 10^6 bytes.
"""
from __future__ import annotations

import json
import re
import time
from datetime import datetime
from pathlib import Path
from typing import Callable

from .tapelog import TapeSession

FINISHED = "Tape session finished"
ARCHIVE_KINDS = frozenset({"ArchiveForUser", "ArchiveForRepack"})
BASES = ("payload", "drive", "session")

_KV = re.compile(r'(?<!\w)(\w+)="((?:[^"\\]|\\.)*)"')   # lookbehind: linear on junk
_ISO = re.compile(r"^(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?)\s")
_SYSLOG = re.compile(r"^([A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d)(?:\.(\d+))?\s")


def _iso_ts(text: str) -> float:
    dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return dt.timestamp()


def _syslog_ts(text: str, frac: str | None, now: float) -> float:
    year = time.localtime(now).tm_year
    ts = time.mktime(time.strptime(f"{year} {text}", "%Y %b %d %H:%M:%S"))
    if ts > now + 86400:            # December lines read in January
        ts = time.mktime(time.strptime(f"{year - 1} {text}", "%Y %b %d %H:%M:%S"))
    return ts + (float(f"0.{frac}") if frac else 0.0)


def _fields_text(line: str) -> tuple[dict[str, str], float | None]:
    fields = {k: v.replace('\\"', '"') for k, v in _KV.findall(line)}
    ts: float | None = None
    if "epoch_time" in fields:
        ts = float(fields["epoch_time"])
    elif (m := _ISO.match(line)):
        ts = _iso_ts(m.group(1))
    elif (m := _SYSLOG.match(line)):
        ts = _syslog_ts(m.group(1), m.group(2), time.time())
    return fields, ts


def _fields_json(line: str) -> tuple[dict[str, str], float | None]:
    obj = json.loads(line)
    if not isinstance(obj, dict):
        raise ValueError("JSON log line is not an object")
    fields = {str(k): str(v) for k, v in obj.items() if not isinstance(v, (dict, list))}
    if "message" in fields and "MSG" not in fields:
        fields["MSG"] = fields["message"]
    ts: float | None = None
    if "epoch_time" in fields:
        ts = float(fields["epoch_time"])
    elif "local_time" in fields:
        ts = _iso_ts(fields["local_time"])
    return fields, ts


def parser(basis: str = "payload", kinds: frozenset[str] | None = ARCHIVE_KINDS
           ) -> Callable[[str, Path], TapeSession | None]:
    """A line parser; ``kinds`` keeps only these mountTypes (None: all)."""
    if basis not in BASES:
        raise ValueError(f"rate basis must be one of {', '.join(BASES)}")

    def parse(line: str, path: Path) -> TapeSession | None:
        if FINISHED not in line:
            return None
        fields, ts = _fields_json(line) if line.startswith("{") else _fields_text(line)
        if fields.get("MSG") != FINISHED:
            return None
        if kinds is not None and fields.get("mountType") not in kinds:
            return None
        if ts is None:
            raise ValueError("session line without a timestamp")
        volume = int(float(fields.get("dataVolume", 0)))
        total = float(fields.get("totalTime", 0))
        speed = {"payload": fields.get("payloadTransferSpeedMBps"),
                 "drive": fields.get("driveTransferSpeedMBps")}.get(basis)
        if speed is not None and float(speed) > 0 and volume > 0:
            duration = volume / (float(speed) * 1e6)
        else:
            duration = total
        if volume < 0 or not duration > 0 or duration > 30 * 86400:
            return None            # nothing written (failed mount, killed session)
        return TapeSession(end=ts, duration=duration, bytes=volume,
                           unit=fields.get("tapeDrive", "?"), vid=fields.get("tapeVid", ""),
                           files=int(float(fields.get("filesCount", 0))),
                           kind=fields.get("mountType", ""),
                           ok=fields.get("status", "success") == "success",
                           emulated=fields.get("emulated") == "true")

    return parse
