"""dCache billing: ``store`` records (a pool flushed one file to tape), text or JSON.

What dCache writes (dCache/dcache: ``skel/share/defaults/billing.properties``,
``BillingCell.java``, ``NearlineStorageHandler.java``, ``StorageInfoMessageSerializer``):

- text, ``billing.text.format.storage-info-message``::

      $date$ [$cellType$:$cellName$:$type$] [$pnfsid$,$filesize$] [$path$] \
          $storageClass$@$hsm$ $transferTime$ $queuingTime$ {$rc$:"$message$"}

  e.g. ``11.21 13:45:01 [pool:pool_t1@pooldomain:store] [0000A1B2...,2147483648]
  [/data/atlas/f1] atlas:raw@osm 107374 7200012 {0:""}``; ``$date$`` is ``MM.dd HH:mm:ss``
  in the server's zone; the file starts with ``## <message-type> <format>`` header lines;
- ``billing.format.json=true``: one JSON object per line, ``msgType`` store/restore,
  ``date`` ISO 8601 with offset, ``cellName``, ``fileSize``, ``queuingTime``,
  ``transferTime`` (ms), ``status: {code, msg}``; no header lines;
- files ``billing-yyyy.MM.dd``, under ``yyyy/MM/`` unless ``billing.text.flat-dir``.

The record's date is taken when the flush is *queued* (the message is created with the
flush request); ``queuingTime`` is the wait until the flush started, ``transferTime`` the
flush itself. So the flush ran from date + queuingTime to date + queuingTime +
transferTime: with hour-long flush queues, the date alone is hours early. A pool is the
unit (dCache does not log the drive). ``restore`` records are reads (staging);
transfers and removals of the same file are not about tape. rc != 0: a failed flush
(``ok=False``, its bytes not counted). The year of a text date comes from the file name
(or the check's time): a 31 December record in January's file is last year's.
"""
from __future__ import annotations

import json
import re
import time
from datetime import datetime, timedelta
from pathlib import Path
from collections.abc import Callable
from zoneinfo import ZoneInfo

from gridxfer.monitoring.sources.logtime import LogClock
from gridxfer.monitoring.sources.tapelog import TapeSession
from gridxfer.monitoring.sources.taperead import LogSource, TapeLogs

KINDS = ("store", "restore")
_RECORD = re.compile(
    r"^(?P<mo>\d\d)\.(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?::(?P<ms>\d{3}))? "
    r"\[(?P<ctype>\w+):(?P<cell>[^\]]*?):(?P<type>[\w-]+)\] (?P<rest>.*)$")
_STORAGE = re.compile(
    r"^\[(?P<pnfsid>[0-9A-Fa-f]+),(?P<size>-?\d+)\] (?:\[(?P<path>[^\]]*)\] )?"
    r"(?P<storage>\S+) (?P<ttime>-?\d+) (?P<qtime>-?\d+) \{(?P<rc>-?\d+):\"(?P<msg>.*)\"\}\s*$")
_FILE_DAY = re.compile(r"billing-(\d{4})\.(\d\d)\.(\d\d)")


def _file_ref(path: Path, clock: LogClock) -> float | None:
    """End of the day named by a billing file (reference for yearless dates)."""
    m = _FILE_DAY.search(path.name)
    if not m:
        return None
    day = datetime(int(m[1]), int(m[2]), int(m[3])) + timedelta(days=1)
    return clock.wall(day.year, day.month, day.day, 0, 0, 0)


def _sample(kind: str, date: float, cell: str, size: int, ttime_ms: int, qtime_ms: int,
            rc: int, storage: str) -> TapeSession:
    if size < 0 or ttime_ms < 0:
        raise ValueError("negative size or transfer time")
    end = date + max(qtime_ms, 0) / 1000.0 + ttime_ms / 1000.0
    ok = rc == 0
    return TapeSession(end=end, duration=ttime_ms / 1000.0 if ok else 0.0,
                       bytes=size if ok else 0, unit=cell.split("@", 1)[0], vid=storage,
                       files=1, kind=kind, ok=ok, write=kind == "store", per_file=True)


def _parse_json(line: str, clock: LogClock) -> TapeSession | None:
    obj = json.loads(line)
    if not isinstance(obj, dict):
        raise ValueError("billing JSON line is not an object")
    kind = obj.get("msgType")
    if kind not in KINDS:
        return None
    status = obj.get("status") or {}
    return _sample(str(kind), clock.iso(str(obj["date"])), str(obj["cellName"]),
                   int(obj["fileSize"]), int(obj["transferTime"]), int(obj["queuingTime"]),
                   int(status.get("code", 0)), str(obj.get("storageInfo", "")))


def parser(clock: LogClock | None = None) -> Callable[[str, Path], TapeSession | None]:
    """A billing line parser: a sample for store/restore, None for other records."""
    clk = clock or LogClock(now=time.time())

    def parse(line: str, path: Path) -> TapeSession | None:
        if line.startswith("##"):
            return None                                   # format header
        if line.startswith("{"):
            return _parse_json(line, clk)
        m = _RECORD.match(line)
        if not m:
            raise ValueError("not a dCache billing record")
        if m["type"] not in KINDS or m["ctype"] != "pool":
            return None
        s = _STORAGE.match(m["rest"])
        if not s:
            raise ValueError("unparsable store/restore record")
        frac = int(m["ms"]) / 1000.0 if m["ms"] else 0.0
        date = clk.yearless(int(m["mo"]), int(m["d"]), int(m["h"]), int(m["mi"]),
                            int(m["s"]), frac, ref=_file_ref(path, clk))
        return _sample(m["type"], date, m["cell"], int(s["size"]), int(s["ttime"]),
                       int(s["qtime"]), int(s["rc"]), s["storage"])

    return parse


def parse(line: str, path: Path) -> TapeSession | None:
    """Parse with the checker's local zone (see :func:`parser`)."""
    return parser(LogClock(now=time.time()))(line, path)


def billing_files(path: Path, now: float, window: float,
                  zone: str | None = None) -> list[Path]:
    """``path`` itself, or for a billing directory the files of the window's days.

    Records are written to the file of the day they are logged (or, with flat-dir, of
    their date, which is when the flush was queued): two days before the window are read
    too, so that flushes queued that long are found.
    """
    if not path.is_dir():
        return [path]
    out: list[Path] = []
    tz = ZoneInfo(zone) if zone else None
    day = datetime.fromtimestamp(now - window - 2 * 86400, tz).date()
    last = datetime.fromtimestamp(now, tz).date()
    while day <= last:
        name = f"billing-{day:%Y.%m.%d}"
        for cand in (path / f"{day:%Y}" / f"{day:%m}" / name, path / name):
            if cand.is_file():
                out.append(cand)
        day += timedelta(days=1)
    return out


def source(paths: list[Path], *, now: float, window: float, zone: str | None = None,
           clock: LogClock | None = None, cookie: Path | None = None) -> TapeLogs:
    """Billing files (or directories: the files of the window's days) as a MonitoringSource
    (see :class:`.taperead.TapeLogs`)."""
    parse = parser(clock or LogClock(zone, now))
    files = [f for p in paths for f in billing_files(Path(p), now, window, zone)]
    return TapeLogs(tuple(LogSource(f, parse, "dcache") for f in files), cookie,
                    kind="dcache")
