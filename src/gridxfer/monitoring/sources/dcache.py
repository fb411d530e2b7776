"""dCache billing ``store`` records (a pool flushing one file to the HSM/tape).

billing.text.format.storage-info-message::

    $date$ [$cellType$:$cellName$:$type$] [$pnfsid$,$filesize$] [$path$] \
        $storageClass$@$hsm$ $transferTime$ $queuingTime$ {$rc$:"$message$"}

e.g. ``11.21 13:45:01 [pool:pool_t1@pooldomain:store] [0000A1B2...,2147483648]
[/data/atlas/f1] atlas:raw@osm 107374 12 {0:""}``. transferTime is in ms; the date has
no year: it comes from the file name (``billing-2026.11.21``) or the current year. A
pool is the unit (dCache does not log the drive); concurrent flushes of one pool are
merged by busy time. Records with rc != 0 are failed flushes and are skipped.
"""
from __future__ import annotations

import re
import time
from pathlib import Path

from .tapelog import TapeSession

_STORE = re.compile(
    r"^(?P<date>\d\d\.\d\d \d\d:\d\d:\d\d) \[pool:(?P<cell>[^\]]+?):store\] "
    r"\[(?P<pnfsid>[0-9A-Fa-f]+),(?P<size>\d+)\] (?:\[(?P<path>[^\]]*)\] )?"
    r"(?P<storage>\S+) (?P<ttime>-?\d+) (?P<qtime>-?\d+) \{(?P<rc>-?\d+):\"(?P<msg>.*)\"\}\s*$")
_YEAR = re.compile(r"billing-(\d{4})\.\d\d\.\d\d")


def parse(line: str, path: Path) -> TapeSession | None:
    if ":store] " not in line:
        return None
    m = _STORE.match(line)
    if not m:
        raise ValueError("unparsable store record")
    if int(m["rc"]) != 0:
        return None
    ttime = int(m["ttime"]) / 1000.0
    if ttime <= 0:
        return None
    now = time.time()
    ym = _YEAR.search(path.name)
    year = int(ym.group(1)) if ym else time.localtime(now).tm_year
    ts = time.mktime(time.strptime(f"{year}.{m['date']}", "%Y.%m.%d %H:%M:%S"))
    if not ym and ts > now + 86400:
        ts = time.mktime(time.strptime(f"{year - 1}.{m['date']}", "%Y.%m.%d %H:%M:%S"))
    pool = m["cell"].split("@", 1)[0]
    return TapeSession(end=ts, duration=ttime, bytes=int(m["size"]), unit=pool,
                       files=1, kind="store", vid=m["storage"])
