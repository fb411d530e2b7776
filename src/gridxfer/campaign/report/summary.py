"""The campaign report, computed from the journal alone (SQL aggregates + numpy).

- per link (tier) and per destination endpoint: files, bytes, per-transfer throughput
  mean/min/max/stddev, failed attempts by ErrorClass;
- a frequency distribution of per-transfer throughput in bins (CNAF iperf-table style);
- the share of files, bytes and sessions per endpoint over time buckets, so that a
  black hole (one endpoint hoarding sessions while delivering few bytes) is visible
  (``share.endpoint_share``);
- a timeline (aggregate and per-link throughput, sessions per endpoint) for ``--png``
  (drawn by ``png.py``).
"""
from __future__ import annotations

import json

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from gridxfer.campaign.journal import store as journal
from gridxfer.campaign.journal import names as endpoint_names
from gridxfer.campaign.report.filters import NO_FILTERS, Filters, scoped
from gridxfer.campaign.report.intervals import overlap
from gridxfer.campaign.report.share import ShareReport, endpoint_share
from gridxfer.campaign.report.tape import TapeReport, curves, tape_report

MB = 1e6


@dataclass(frozen=True)
class GroupStats:
    key: str                      # tier name or endpoint URL
    tier: str
    files_done: int
    files_failed: int
    transfers: int                # successful attempts
    bytes: int
    mean_rate: float              # bytes/s per transfer
    min_rate: float
    max_rate: float
    stddev_rate: float
    failures: dict[str, int]      # failed attempts by error class


@dataclass(frozen=True)
class Bin:
    low: float                    # bytes/s
    high: float
    count: int
    share: float                  # of all successful transfers


@dataclass(frozen=True)
class Report:
    name: str
    state: str
    started: float | None
    seconds: float
    files_total: int
    files_done: int
    files_failed: int
    bytes_done: int
    rate: float                   # aggregate bytes/s over the campaign's wall time
    links: tuple[GroupStats, ...]
    endpoints: tuple[GroupStats, ...]
    histogram: tuple[Bin, ...]
    share: ShareReport            # files/bytes/sessions per endpoint over time (share.py)
    failed_files: tuple[dict, ...]
    tape: TapeReport | None = None      # tape tiers and staging (tape.py)
    job_metadata: Any = None      # FTS3's job_metadata from the campaign file, if any
    names: dict[str, str] = field(default_factory=dict)  # endpoint URL -> name (journal/names.py)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_report(name: str, *, buckets: int = 12, bins: int = 10,
                 filters: Filters = NO_FILTERS) -> Report:
    with scoped(name, filters) as (conn, names):
        return _build(conn, name, buckets, bins, names, bool(filters))


def _build(conn, name: str, n_buckets: int, n_bins: int, names: dict[str, str],
           filtered: bool = False) -> Report:
    meta = journal.get_meta(conn)
    tally = journal.tally(conn, indexed=not filtered)
    t0, t1 = conn.execute(
        "SELECT min(started), max(coalesce(ended, started)) FROM attempts"
    ).fetchone()
    seconds = (t1 - t0) if t0 is not None else 0.0
    fail_rows = conn.execute("SELECT tier, endpoint, error_class, count(*) FROM attempts "
                             "WHERE status = 'failed' GROUP BY 1, 2, 3").fetchall()
    ok_rows = conn.execute("SELECT tier, endpoint, count(*), total(bytes), total(rate), "
                           "total(rate * rate), min(rate), max(rate) FROM attempts "
                           "WHERE status = 'ok' GROUP BY 1, 2").fetchall()
    per_ep_files = {(r[0], r[1]): r[2] for r in conn.execute(
        "SELECT tier, endpoint, count(*) FROM files WHERE state = 'done' GROUP BY 1, 2")}
    per_ep_failed = {(r[0], r[1]): r[2] for r in conn.execute(
        "SELECT tier, endpoint, count(*) FROM files WHERE state = 'failed' GROUP BY 1, 2")}
    endpoints = _groups(ok_rows, fail_rows, per_ep_files, per_ep_failed, by_tier=False)
    links = _groups(ok_rows, fail_rows,
                    {(t, t): by.get("done", (0, 0))[0] for t, by in tally.items()},
                    {(t, t): by.get("failed", (0, 0))[0] for t, by in tally.items()}, by_tier=True)
    done = sum(by.get("done", (0, 0))[0] for by in tally.values())
    failed = sum(by.get("failed", (0, 0))[0] for by in tally.values())
    nbytes = sum(by.get("done", (0, 0))[1] for by in tally.values())
    total = sum(n for by in tally.values() for n, _ in by.values())
    failed_files = tuple(dict(r) for r in conn.execute(
        "SELECT name, tier, endpoint, error_class, error_msg, attempts FROM files "
        "WHERE state = 'failed' ORDER BY id LIMIT 100"))
    return Report(name, meta.get("state", "?"), t0, seconds, total, done, failed, nbytes,
                  nbytes / seconds if seconds > 0 else 0.0, links, endpoints,
                  _histogram(conn, n_bins), endpoint_share(conn, bins=n_buckets), failed_files,
                  tape_report(conn, time.time()), _metadata(meta),
                  names)


def _metadata(meta: dict[str, str]) -> Any:
    """The campaign's job_metadata (stored as JSON), or None."""
    try:
        return json.loads(meta["job_metadata"]) if "job_metadata" in meta else None
    except ValueError:
        return meta["job_metadata"]


def _groups(
    ok_rows, fail_rows, files_done, files_failed, *, by_tier: bool
) -> tuple[GroupStats, ...]:
    acc: dict[tuple[str, str], list] = {}

    def key(tier: str, ep: str) -> tuple[str, str]:
        return (tier, tier) if by_tier else (tier, ep)

    for tier, ep, n, b, s1, s2, lo, hi in ok_rows:
        a = acc.setdefault(key(tier, ep), [0, 0.0, 0.0, 0.0, math.inf, 0.0, {}])
        a[0] += n
        a[1] += b
        a[2] += s1
        a[3] += s2
        a[4] = min(a[4], lo)
        a[5] = max(a[5], hi)
    for tier, ep, cls, n in fail_rows:
        a = acc.setdefault(key(tier, ep), [0, 0.0, 0.0, 0.0, math.inf, 0.0, {}])
        a[6][cls or "other"] = a[6].get(cls or "other", 0) + n
    out = []
    for (tier, k), (n, b, s1, s2, lo, hi, fails) in sorted(acc.items()):
        mean = s1 / n if n else 0.0
        var = max(0.0, s2 / n - mean * mean) if n else 0.0
        out.append(GroupStats(k, tier, files_done.get((tier, k), 0), files_failed.get((tier, k), 0),
                              n, int(b), mean, lo if n else 0.0, hi, math.sqrt(var), fails))
    return tuple(out)


def nice_width(span: float, n: int) -> float:
    """A 1/2/5 x 10^k bin width so that ``n`` bins cover ``span``."""
    if span <= 0:
        return 1.0
    raw = span / n
    exp = 10 ** math.floor(math.log10(raw))
    return next(m * exp for m in (1, 2, 5, 10) if m * exp >= raw)


def _histogram(conn, n_bins: int) -> tuple[Bin, ...]:
    hi = conn.execute("SELECT max(rate), count(*) FROM attempts WHERE status = 'ok'").fetchone()
    if not hi[1]:
        return ()
    width = nice_width((hi[0] or 0) * 1.0001, n_bins)
    counts = dict(conn.execute("SELECT CAST(rate / ? AS INTEGER), count(*) FROM attempts "
                               "WHERE status = 'ok' GROUP BY 1", (width,)).fetchall())
    top = max(counts) if counts else 0
    return tuple(Bin(i * width, (i + 1) * width, counts.get(i, 0), counts.get(i, 0) / hi[1])
                 for i in range(top + 1))


def _load_attempts(conn) -> dict[str, np.ndarray]:
    rows = conn.execute("SELECT started, ended, bytes, tier, endpoint, status FROM attempts "
                        "WHERE ended IS NOT NULL").fetchall()
    if not rows:
        return {}
    cols = list(zip(*rows, strict=True))
    return {"s": np.array(cols[0], float), "e": np.array(cols[1], float),
            "b": np.array(cols[2], float), "tier": np.array(cols[3], object),
            "ep": np.array(cols[4], object), "ok": np.array([c == "ok" for c in cols[5]])}


def timeline(name: str, points: int = 200, filters: Filters = NO_FILTERS) -> dict[str, Any]:
    """Throughput over time: {'t': seconds, 'aggregate': B/s, 'links': {tier: B/s},
    'sessions': {endpoint name: attempts in flight at each t}} from every ended
    attempt's bytes spread evenly over its duration."""
    with scoped(name, filters) as (conn, names):
        a = _load_attempts(conn)
        if not a:
            return {"t": [], "aggregate": [], "links": {}, "sessions": {}, "tape": {}}
        t0, t1 = float(a["s"].min()), float(a["e"].max())
        last = conn.execute("SELECT max(on_tape) FROM files").fetchone()[0] \
            if "on_tape" in {r[1] for r in conn.execute("PRAGMA table_info(files)")} else None
        t1 = max(t1, last or t1)
        width = max((t1 - t0) / points, 0.05)
        edges = t0 + np.arange(0, math.ceil((t1 - t0) / width) + 1) * width
        mids = ((edges[:-1] + edges[1:]) / 2 - t0).tolist()
        tape = curves(conn, t0, (edges[1:] - t0).tolist())    # by each bin's end
    dur = np.maximum(a["e"] - a["s"], 1e-6)
    rate = a["b"] / dur

    def series(mask: np.ndarray, w: np.ndarray) -> list[float]:
        return (np.diff(overlap(a["s"][mask], a["e"][mask], w[mask], edges)) / width).tolist()

    every = np.ones(len(rate), bool)
    return {"t": mids, "tape": tape,
            "aggregate": series(every, rate),
            "links": {t: series(a["tier"] == t, rate) for t in sorted(set(a["tier"]))},
            "sessions": {endpoint_names.name_of(names, e): in_flight(a, a["ep"] == e,
                                                                     edges[:-1] + width / 2)
                         for e in sorted(set(a["ep"]))}}


def in_flight(a: dict[str, np.ndarray], mask: np.ndarray, at: np.ndarray) -> list[int]:
    """Attempts in flight at each instant of ``at`` (whole numbers: sessions, not means)."""
    starts, ends = np.sort(a["s"][mask]), np.sort(a["e"][mask])
    return (np.searchsorted(starts, at, side="right")
            - np.searchsorted(ends, at, side="right")).astype(int).tolist()
