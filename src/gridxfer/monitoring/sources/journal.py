"""Transfer throughput over a time window, read (read-only) from campaign journals.

Every attempt that overlaps the window contributes its bytes prorated to the overlap:
an attempt of 100 MB over [t, t+10s] contributes 50 MB to a window that starts at t+5.
Attempts still running (``ended`` NULL) count the bytes recorded so far over
[started, now]. Column names are the contract in ``gridxfer.campaign.journal.store``.
:class:`JournalSource` is the MonitoringSource (its series: one sample per attempt);
:func:`throughput` sums a series for the checks.
"""
from __future__ import annotations

import fnmatch
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from gridxfer.campaign.journal import names as jnames
from gridxfer.campaign.journal import migrate
from gridxfer.campaign.journal import store as jr
from gridxfer.campaign.journal.check import not_readable
from gridxfer.errors import UsageError
from gridxfer.monitoring.series import Point, Series, Window


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
        denied = not_readable(path)         # before is_file(): a stat may be refused too
        if denied or not path.is_file():
            raise UsageError(denied or f"no journal for campaign {campaign!r} at {path}")
        return [path]
    paths = jr.list_journals()
    if not paths:
        raise UsageError(not_readable(jr.journal_dir() / "*.sqlite")
                         or f"no campaign journals in {jr.journal_dir()}")
    return paths


_QUERY = """
SELECT started, ended, bytes, endpoint, tier, status FROM attempts
WHERE started < :end AND (ended IS NULL OR ended > :start)
"""


@dataclass(frozen=True)
class JournalSource:
    """Attempts from campaign journals: one sample per attempt that overlaps the window.

    A sample covers ``[started, ended]`` with the attempt's bytes; an attempt still running
    covers ``[started, window end]`` with the bytes recorded so far (label ``state``
    ``running``); label ``unit`` is the endpoint's journalled name (``journal/names.py``),
    so perfdata labels are short and stable. ``endpoint`` is a glob or an exact endpoint
    URL or name (``root://se2*``, ``t1a-*``); ``tier`` exact."""

    paths: tuple[Path, ...]
    endpoint: str | None = None
    tier: str | None = None
    kind: str = "journal"

    def series(self, window: Window) -> Series[Point]:
        samples: list[Point] = []
        urls: set[str] = set()          # every endpoint the journals know, by URL
        known: set[str] = set()         # and by name
        tiers: set[str] = set()         # every tier of their files (with a tier filter)
        for path in self.paths:
            try:
                conn = jr.connect(path, readonly=True)
                try:
                    rows = conn.execute(_QUERY, {"start": window.start,
                                                 "end": window.end}).fetchall()
                    names = jnames.read(conn)
                    if self.tier:
                        tiers.update(r[0] for r in conn.execute("SELECT DISTINCT tier FROM files"))
                finally:
                    conn.close()
            except sqlite3.Error as exc:
                raise UsageError(f"{path}: not a readable campaign journal ({exc})") from None
            urls.update(names)
            known.update(names.values())
            for row in rows:
                url = str(row["endpoint"])
                ep = jnames.name_of(names, url)
                urls.add(url)
                known.add(ep)
                if self.endpoint and not _matches(self.endpoint, (ep, url)):
                    continue
                if self.tier and row["tier"] != self.tier:
                    continue
                s = float(row["started"])
                running = row["ended"] is None
                e = window.end if running else float(row["ended"])
                samples.append(Point(time=e, start=s, value=max(0.0, float(row["bytes"] or 0)),
                                     labels={"unit": ep, "tier": str(row["tier"]),
                                             "status": str(row["status"]),
                                             "state": "running" if running else "ended"}))
        self._check_filters(urls, known, tiers)
        return Series(window, tuple(sorted(samples, key=lambda p: p.time)),
                      inputs=len(self.paths))

    def _check_filters(self, urls: set[str], known: set[str], tiers: set[str]) -> None:
        """A filter that matches nothing the journals know is a mistake (a typo, the wrong
        campaign), not a window without transfers: refused, naming what there is."""
        where = self.paths[0].name if len(self.paths) == 1 else f"{len(self.paths)} journals"
        if self.endpoint and not _matches(self.endpoint, urls | known):
            raise UsageError(f"endpoint filter {self.endpoint!r} matches no endpoint of "
                             f"{where} (endpoints: {_listing(sorted(known))})")
        if self.tier and self.tier not in tiers:
            raise UsageError(f"tier {self.tier!r} is no tier of {where} "
                             f"(tiers: {_listing(sorted(tiers))})")


def _matches(pattern: str, candidates: Iterable[str]) -> bool:
    """``pattern`` is one of ``candidates`` or a glob matching one."""
    return any(x == pattern or fnmatch.fnmatchcase(x, pattern) for x in candidates)


def _listing(items: list[str], most: int = 6) -> str:
    if not items:
        return "none"
    return ", ".join(items[:most]) + (f" and {len(items) - most} more" if len(items) > most
                                      else "")


def throughput(series: Series[Point]) -> WindowThroughput:
    """The window's figures: bytes of each attempt prorated to its overlap with the window
    (all of them for an attempt of no duration)."""
    start, end = series.window.start, series.window.end
    total = 0.0
    attempts = active = failed = 0
    per_ep: dict[str, float] = {}
    for p in series.samples:
        s, e, nbytes = p.start, p.time, p.value
        if p.labels["state"] == "running" and s <= end:
            active += 1
        if p.labels["status"] == "failed":
            failed += 1
        attempts += 1
        span = e - s
        overlap = min(e, end) - max(s, start)
        if overlap <= 0 and span > 0:
            continue
        share = nbytes if span <= 0 else nbytes * overlap / span
        total += share
        ep = p.labels["unit"]
        per_ep[ep] = per_ep.get(ep, 0.0) + share
    return WindowThroughput(start=start, end=end, bytes=total, attempts=attempts, active=active,
                            failed=failed, journals=series.inputs, per_endpoint=per_ep)


def window_to_tape(paths: list[Path], window: float, *, now: float | None = None,
                   tier: str | None = None) -> float:
    """Bytes/s that reached tape over ``[now - window, now]``: the sizes of the files of
    tape-backed tiers whose ``on_tape`` (when the campaign's poller saw the storage say
    so) falls in the window. 0 for a journal written before the tape columns."""
    end = time.time() if now is None else now
    total = 0.0
    for path in paths:
        try:
            conn = jr.connect(path, readonly=True)
            try:
                if not migrate.has_tape(conn):
                    continue
                sql = ("SELECT total(size) FROM files WHERE state = 'done' AND on_tape > ? "
                       "AND on_tape <= ?" + (" AND tier = ?" if tier else ""))
                args = (end - window, end, *((tier,) if tier else ()))
                total += conn.execute(sql, args).fetchone()[0]
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise UsageError(f"{path}: not a readable campaign journal ({exc})") from None
    return total / window if window > 0 else 0.0


def window_throughput(paths: list[Path], window: float, *, now: float | None = None,
                      endpoint: str | None = None, tier: str | None = None) -> WindowThroughput:
    """Aggregate throughput over ``[now - window, now]`` across ``paths``."""
    end = time.time() if now is None else now
    return throughput(JournalSource(tuple(paths), endpoint, tier).series(Window(end, window)))
