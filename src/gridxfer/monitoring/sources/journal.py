"""Transfer throughput over a time window, read (read-only) from campaign journals.

Every attempt that overlaps the window contributes its bytes prorated to the overlap:
an attempt of 100 MB over [t, t+10s] contributes 50 MB to a window that starts at t+5.
Attempts still running (``ended`` NULL) count the bytes recorded so far over
[started, now]. Column names are the contract in ``gridxfer.campaign.journal.store``.
"""
from __future__ import annotations

import fnmatch
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from gridxfer.campaign.journal import store as jr
from gridxfer.errors import UsageError


@dataclass(frozen=True)
class WindowThroughput:
    start: float
    end: float
    bytes: float
    attempts: int           # attempts overlapping the window
    active: int             # of which still running at `end`
    failed: int
    journals: int
    per_endpoint: dict[str, float] = field(default_factory=dict)   # prorated bytes

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def rate(self) -> float:
        """Bytes per second over the window."""
        return self.bytes / self.seconds if self.seconds > 0 else 0.0

    @property
    def idle(self) -> bool:
        return self.attempts == 0

    def endpoint_rates(self) -> dict[str, float]:
        return {ep: b / self.seconds for ep, b in sorted(self.per_endpoint.items())}


def journal_paths(campaign: str | None = None, journal: Path | None = None) -> list[Path]:
    """One journal by path or campaign name, else every journal in $GRIDXFER_HOME."""
    if journal is not None:
        if not Path(journal).is_file():
            raise UsageError(f"no such journal: {journal}")
        return [Path(journal)]
    if campaign is not None:
        path = jr.journal_path(campaign)
        if not path.is_file():
            raise UsageError(f"no journal for campaign {campaign!r} at {path}")
        return [path]
    paths = jr.list_journals()
    if not paths:
        raise UsageError(f"no campaign journals in {jr.journal_dir()}")
    return paths


_QUERY = """
SELECT started, ended, bytes, endpoint, tier, status FROM attempts
WHERE started < :end AND (ended IS NULL OR ended > :start)
"""


def window_throughput(paths: list[Path], window: float, *, now: float | None = None,
                      endpoint: str | None = None, tier: str | None = None) -> WindowThroughput:
    """Aggregate throughput over ``[now - window, now]`` across ``paths``.

    ``endpoint`` is a glob (``root://se2*``) or an exact endpoint name; ``tier`` exact.
    """
    end = time.time() if now is None else now
    start = end - window
    total = 0.0
    attempts = active = failed = 0
    per_ep: dict[str, float] = {}
    for path in paths:
        try:
            conn = jr.connect(path, readonly=True)
            try:
                rows = conn.execute(_QUERY, {"start": start, "end": end}).fetchall()
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise UsageError(f"{path}: not a readable campaign journal ({exc})") from None
        for row in rows:
            ep = str(row["endpoint"])
            if endpoint and not (ep == endpoint or fnmatch.fnmatchcase(ep, endpoint)):
                continue
            if tier and row["tier"] != tier:
                continue
            s = float(row["started"])
            running = row["ended"] is None
            e = end if running else float(row["ended"])
            nbytes = max(0.0, float(row["bytes"] or 0))
            if running and s <= end:
                active += 1
            if row["status"] == "failed":
                failed += 1
            attempts += 1
            span = e - s
            overlap = min(e, end) - max(s, start)
            if overlap <= 0 and span > 0:
                continue
            share = nbytes if span <= 0 else nbytes * overlap / span
            total += share
            per_ep[ep] = per_ep.get(ep, 0.0) + share
    return WindowThroughput(start=start, end=end, bytes=total, attempts=attempts, active=active,
                            failed=failed, journals=len(paths), per_endpoint=per_ep)
