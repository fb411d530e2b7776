"""CTA ``cta-taped`` logs: "Tape session finished" lines, key="value" text or JSON.

What cta-taped writes (cern-cta/CTA, ``common/log/Logger.cpp``)::

    Nov 21 14:45:01.123456789 tpsrv01 cta-taped: LVL="INFO" PID="41" TID="41"
      MSG="Tape session finished" dataVolume="64424509440" driveTransferSpeedMBps="16.9"
      event_name="tape_session_finished" killSignal="0" mountType="ArchiveForUser"
      payloadTransferSpeedMBps="16.9" status="success" tapeDrive="LTO9-01" totalTime="3812.5" ...

The header is local time without year or zone (read with :class:`.logtime.LogClock`);
through rsyslog it may carry a traditional or an RFC 3339 header instead. The JSON format
(``log format json``) has ``epoch_time``, ``local_time`` (``%FT%T%z``), ``message`` and the
parameters, as strings in older releases and typed since "JSON logging with correct field
types"; ``event_name`` came later ("Add event_name to important CTA log messages").

The parent process (``taped/daemon/DriveHandler.cpp``) logs "Tape session finished" when a
session child ends, with the figures the child's watchdog sent it
(``taped/session/TaskWatchDog.hpp``: ``payloadTransferSpeedMBps`` = dataVolume / 1e6 /
totalTime, ``driveTransferSpeedMBps`` adds headerVolume; totalTime runs from mount to
unmount). A child killed by a signal gets two lines: one with ``Error_sessionKilled``,
``killSignal`` and ``status="failure"``, then one with ``killSignal`` and the same figures
but no status (the *echo*). A session killed early may have no figures at all.

Rate basis: ``payload`` (default: duration = dataVolume / payloadTransferSpeedMBps, which
on real cta-taped lines is totalTime, i.e. the same as ``session``), ``session``
(dataVolume / totalTime), ``drive`` (driveTransferSpeedMBps: also dataVolume / totalTime
plus the headers, a few kB per file) and ``transfer`` (dataVolume / transferTime: the time
the drive spent on files, without mount, positioning and unmount). MB are 10^6 bytes.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from collections.abc import Callable

from gridxfer.monitoring.sources.logtime import LogClock
from gridxfer.monitoring.sources.tapelog import TapeSession
from gridxfer.monitoring.sources.taperead import LogSource, TapeLogs

FINISHED = "Tape session finished"
ARCHIVE_KINDS = frozenset({"ArchiveForUser", "ArchiveForRepack"})
BASES = ("payload", "session", "drive", "transfer")
DOWN_EVENTS = {"putting_tape_drive_down": "down", "putting_tape_drive_up": "up"}
DESIRED = "Updating desired drive state"
_MARKERS = (FINISHED, "putting_tape_drive", DESIRED)

_KV = re.compile(r'(?<!\w)(\w+)="((?:[^"\\]|\\.)*)"')   # lookbehind: linear on junk


def _fields_text(line: str, clock: LogClock) -> tuple[dict[str, str], float | None]:
    fields = {k: v.replace('\\"', '"') for k, v in _KV.findall(line)}
    ts = clock.header(line)
    if ts is None and "epoch_time" in fields:
        ts = float(fields["epoch_time"])
    return fields, ts


def _fields_json(line: str, clock: LogClock) -> tuple[dict[str, str], float | None]:
    obj = json.loads(line)
    if not isinstance(obj, dict):
        raise ValueError("JSON log line is not an object")
    fields = {str(k): (str(v).lower() if isinstance(v, bool) else str(v))
              for k, v in obj.items() if v is not None and not isinstance(v, (dict, list))}
    if "message" in fields and "MSG" not in fields:
        fields["MSG"] = fields["message"]
    ts: float | None = None
    if "epoch_time" in fields:
        ts = float(fields["epoch_time"])
    elif "local_time" in fields:
        ts = clock.iso(fields["local_time"])
    return fields, ts


def _num(fields: dict[str, str], key: str) -> float:
    value = float(fields.get(key) or 0)
    if value != value or value < 0:
        raise ValueError(f"bad {key}")
    return value


def _duration(fields: dict[str, str], basis: str, volume: float) -> float:
    total = _num(fields, "totalTime")
    if volume <= 0:
        return total
    if basis == "transfer":
        return _num(fields, "transferTime") or total
    if basis in ("payload", "drive"):
        speed = _num(fields, f"{basis}TransferSpeedMBps")
        if speed > 0:
            return volume / (speed * 1e6)
    return total


def _state_event(fields: dict[str, str], ts: float, clock: LogClock) -> TapeSession | None:
    event = DOWN_EVENTS.get(fields.get("event_name", ""))
    if fields.get("MSG") == DESIRED and fields.get("up") in ("up", "down"):
        event = fields["up"]
    unit = fields.get("tapeDrive") or fields.get("drive_name")
    if event is None or not unit:
        return None
    return TapeSession(end=ts, duration=0.0, bytes=0, unit=unit, event=event, write=False)


def parser(basis: str = "payload", kinds: frozenset[str] | None = ARCHIVE_KINDS,
           clock: LogClock | None = None) -> Callable[[str, Path], TapeSession | None]:
    """A line parser; ``kinds``: the mountTypes that are writes (None: every session).

    Returns a sample for every "Tape session finished" line (reads too, with
    ``write=False``: they tell whether a drive works) and for drives put down or up; None
    for the other cta-taped lines; ValueError for a line that is not cta-taped's format.
    """
    if basis not in BASES:
        raise ValueError(f"rate basis must be one of {', '.join(BASES)}")
    clk = clock or LogClock(now=time.time())

    def parse(line: str, path: Path) -> TapeSession | None:
        if line.startswith("{"):
            if not line.endswith("}"):
                raise ValueError("truncated JSON line")
            if not any(m in line for m in _MARKERS):
                return None
            fields, ts = _fields_json(line, clk)
        else:
            if 'MSG="' not in line:
                raise ValueError("not a cta-taped line")
            if not any(m in line for m in _MARKERS):
                return None
            fields, ts = _fields_text(line, clk)
        if ts is None:
            raise ValueError("cta-taped line without a timestamp")
        if fields.get("MSG") != FINISHED:
            return _state_event(fields, ts, clk)
        unit = fields.get("tapeDrive") or fields.get("drive_name")   # static param since 5.x
        if not unit:
            raise ValueError("session line without tapeDrive")
        status = fields.get("status")
        killed = "Error_sessionKilled" in fields or fields.get("killSignal", "0") not in ("0", "")
        mount = fields.get("mountType", "")
        volume = _num(fields, "dataVolume")
        duration = _duration(fields, basis, volume)
        if duration > 30 * 86400:
            raise ValueError("session longer than 30 days")
        return TapeSession(end=ts, duration=duration, bytes=int(volume), unit=unit,
                           vid=fields.get("tapeVid", ""),
                           files=int(_num(fields, "filesCount")), kind=mount,
                           ok=status == "success", emulated=fields.get("emulated") == "true",
                           write=kinds is None or mount in kinds, killed=killed,
                           echo=killed and status is None and "Error_sessionKilled" not in fields)

    return parse


def source(paths: list[Path], *, basis: str = "payload",
           kinds: frozenset[str] | None = ARCHIVE_KINDS, clock: LogClock | None = None,
           cookie: Path | None = None) -> TapeLogs:
    """cta-taped logs as a MonitoringSource (see :class:`.taperead.TapeLogs`)."""
    parse = parser(basis, kinds, clock)
    return TapeLogs(tuple(LogSource(Path(p), parse, "cta") for p in paths), cookie, kind="cta")
