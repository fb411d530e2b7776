"""Tape in the read side of a journal, per tape-backed tier (``archive`` in the spec) and
for a staged source: the archive backlog, the time to tape (copy verified -> the storage
said "on tape") as a distribution, the tape rate, and the staging figures.

Read by ``campaign status`` and ``report`` (and ``--json``) and the PNG's tape curves (the
Nagios buffer check reads the same columns: ``monitoring/sources/journal.window_to_tape``).
Times are the journal's: ``copied`` when the copy and its checksum ended, ``on_tape`` when
the poller first saw the file on tape, so a time to tape is exact to the poll gap (at most
2 s for a small backlog, up to 60 s for a large one: ``engine/tapepoll.py``). A journal no
runner of this version opened has no tape columns: every function returns nothing.
"""
from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import asdict, dataclass
from typing import Any

from gridxfer.campaign.journal import migrate

RECENT = 600.0               # s: the window of the "recent" tape rate and of tape_flow


@dataclass(frozen=True)
class Spread:
    """A distribution of seconds: count, median, 90th percentile, max."""
    n: int
    p50: float
    p90: float
    max: float


@dataclass(frozen=True)
class TierTape:
    tier: str
    archive_timeout: float
    backlog: int                  # files archiving (copied, not on tape yet)
    backlog_bytes: int
    oldest: float | None          # seconds the longest-waiting backlog file has waited
    on_tape: int
    on_tape_bytes: int
    failed: int                   # archive_timeout
    time_to_tape: Spread | None
    rate: float                   # bytes/s to tape from the first copy to the last file on tape
    recent_rate: float            # bytes/s to tape over the last RECENT seconds (of ``now``)


@dataclass(frozen=True)
class Staging:
    staging: int                  # source files waiting to be online
    staged: int                   # source files online
    failed: int                   # source files failed (class staging)
    time_to_stage: Spread | None  # stage request -> online


@dataclass(frozen=True)
class TapeReport:
    tiers: tuple[TierTape, ...]
    staging: Staging | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def tape_tiers(conn: sqlite3.Connection) -> dict[str, float]:
    """{tier: archive timeout} from the spec the journal keeps."""
    spec = _spec(conn)
    return {str(t.get("name")): float(t["archive_timeout"])
            for t in _dicts(spec.get("destinations"))
            if isinstance(t.get("archive_timeout"), int | float) and t["archive_timeout"] > 0}


def tape_report(conn: sqlite3.Connection, now: float) -> TapeReport | None:
    """None when the campaign has no tape tier and no staged source (or an old journal)."""
    if not migrate.has_tape(conn):
        return None
    tiers = tape_tiers(conn)
    source = _spec(conn).get("source")
    staged = isinstance(source, dict) and bool(source.get("bring_online"))
    if not tiers and not staged:
        return None
    return TapeReport(tuple(_tier(conn, t, timeout, now) for t, timeout in sorted(tiers.items())),
                      _staging(conn) if staged else None)


def _tier(conn: sqlite3.Connection, tier: str, timeout: float, now: float) -> TierTape:
    backlog, bbytes, first_wait = conn.execute(
        "SELECT count(*), total(size), min(copied) FROM files WHERE state='archiving' AND tier=?",
        (tier,)).fetchone()
    n, nbytes, t0, t1 = conn.execute(
        f"SELECT count(*), total(size), min(copied), max(on_tape) FROM files WHERE {_ON_TAPE}",
        (tier,)).fetchone()
    recent = conn.execute(f"SELECT total(size) FROM files WHERE {_ON_TAPE} AND on_tape > ?",
                          (tier, now - RECENT)).fetchone()[0]
    failed = conn.execute("SELECT count(*) FROM files WHERE state='failed' AND tier=? AND "
                          "error_class='archive_timeout'", (tier,)).fetchone()[0]
    span = (t1 - t0) if t0 is not None and t1 is not None else 0.0
    return TierTape(tier, timeout, backlog, int(bbytes),
                    max(0.0, now - first_wait) if first_wait is not None else None,
                    n, int(nbytes), failed, _time_to_tape(conn, tier, n),
                    nbytes / span if span > 0 else 0.0, recent / RECENT)


_ON_TAPE = "state = 'done' AND on_tape IS NOT NULL AND tier = ?"   # migrate.TAPE_INDEXES


def _time_to_tape(conn: sqlite3.Connection, tier: str, n: int) -> Spread | None:
    """Nearest-rank percentiles read from the index on time to tape (no sort, no scan)."""
    if not n:
        return None

    def at(rank: int) -> float:
        return float(conn.execute(
            f"SELECT on_tape - copied FROM files WHERE {_ON_TAPE} ORDER BY on_tape - copied "
            "LIMIT 1 OFFSET ?", (tier, rank)).fetchone()[0])
    return Spread(n, at(math.ceil(0.5 * n) - 1), at(math.ceil(0.9 * n) - 1), at(n - 1))


def _staging(conn: sqlite3.Connection) -> Staging:
    """Counted per source file (a source copied to two tiers is staged once)."""
    waiting = conn.execute("SELECT count(DISTINCT src_url) FROM files WHERE state='staging'"
                           ).fetchone()[0]
    waits = [r[0] for r in conn.execute(
        "SELECT min(staged - stage_requested) FROM files WHERE staged IS NOT NULL AND "
        "stage_requested IS NOT NULL GROUP BY src_url ORDER BY 1")]
    failed = conn.execute("SELECT count(DISTINCT src_url) FROM files WHERE state='failed' AND "
                          "error_class='staging'").fetchone()[0]
    return Staging(waiting, len(waits), failed, spread(waits))


def spread(sorted_values: list[float]) -> Spread | None:
    """Nearest-rank percentiles of values already sorted."""
    if not sorted_values:
        return None
    n = len(sorted_values)

    def rank(p: float) -> float:
        return float(sorted_values[min(n - 1, max(0, math.ceil(p * n) - 1))])
    return Spread(n, rank(0.5), rank(0.9), float(sorted_values[-1]))


def _spec(conn: sqlite3.Connection) -> dict[str, Any]:
    """The spec the journal keeps, or {} when it is missing or damaged (a report reads
    damaged journals too: undecodable text, JSON nested past the recursion limit, a list)."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key='spec'").fetchone()
        spec = json.loads(row[0]) if row else {}
    except (ValueError, TypeError, RecursionError, sqlite3.Error):
        return {}
    return spec if isinstance(spec, dict) else {}


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def curves(conn: sqlite3.Connection, t0: float, t: list[float]) -> dict[str, dict[str, list]]:
    """{tier: {"disk": bytes copied by each time, "tape": bytes on tape by each time}} for
    the PNG, ``t`` in seconds since ``t0`` (cumulative: the gap is the backlog)."""
    import numpy as np
    out: dict[str, dict[str, list]] = {}
    if not migrate.has_tape(conn):
        return out
    at = np.asarray(t, float) + t0
    for tier in sorted(tape_tiers(conn)):
        rows = conn.execute("SELECT copied, on_tape, size FROM files WHERE tier=? AND "
                            "copied IS NOT NULL", (tier,)).fetchall()
        if not rows:
            continue
        copied = np.array([r[0] for r in rows], float)
        tape = np.array([r[1] if r[1] is not None else np.inf for r in rows], float)
        size = np.array([r[2] for r in rows], float)
        out[tier] = {"disk": [float(size[copied <= x].sum()) for x in at],
                     "tape": [float(size[tape <= x].sum()) for x in at]}
    return out


def render(rep: TapeReport) -> list[str]:
    """Text lines for ``status`` and ``report``."""
    from gridxfer.units import fmt_bytes, fmt_duration
    lines = []
    for t in rep.tiers:
        ttt = (f"time to tape p50 {fmt_duration(t.time_to_tape.p50)}, p90 "
               f"{fmt_duration(t.time_to_tape.p90)}, max {fmt_duration(t.time_to_tape.max)}"
               if t.time_to_tape else "time to tape: none on tape yet")
        oldest = f" (oldest waits {fmt_duration(t.oldest)})" if t.oldest is not None else ""
        lines.append(f"tape {t.tier}: {t.on_tape} on tape ({fmt_bytes(t.on_tape_bytes)}), "
                     f"backlog {t.backlog} files ({fmt_bytes(t.backlog_bytes)}){oldest}, "
                     f"{t.failed} archive_timeout; {ttt}; rate {fmt_bytes(t.rate)}/s "
                     f"(last {fmt_duration(RECENT)}: {fmt_bytes(t.recent_rate)}/s)")
    if rep.staging is not None:
        s = rep.staging
        tts = (f", time to stage p50 {fmt_duration(s.time_to_stage.p50)}, max "
               f"{fmt_duration(s.time_to_stage.max)}" if s.time_to_stage else "")
        lines.append(f"staging: {s.staged} online, {s.staging} waiting, {s.failed} failed{tts}")
    return lines
