"""Per-endpoint share of files, bytes and sessions over time, from a campaign journal.

A black hole shows as an endpoint that holds a growing share of the *sessions* while
its share of the *bytes* stays small: sessions pile up on it because it is slow. Its
absence shows as session and byte shares that track each other.

Each attempt's bytes are spread evenly over its duration; sessions are the mean number
of attempts in flight per time bin; files count at the end of their successful attempt.

    endpoint_share(conn, bins=12) -> ShareReport     # typed result (to_dict for --json)
    render_share(report) -> str                      # the text table for `campaign report`
    plot_share(report, axes)                         # matplotlib stack plots, optional
"""
from __future__ import annotations

import sqlite3
import time
from dataclasses import asdict, dataclass
from typing import Any

from ..units import fmt_bytes, fmt_duration, fmt_rate

BLACKHOLE_FACTOR = 2.0     # session share >= 2x byte share: sessions pile up there


@dataclass(frozen=True)
class ShareBin:
    start: float                        # seconds since the first attempt
    end: float
    files: dict[str, int]               # endpoint -> files completed in the bin
    bytes: dict[str, float]             # endpoint -> bytes written in the bin
    sessions: dict[str, float]          # endpoint -> mean sessions in flight


@dataclass(frozen=True)
class EndpointShare:
    endpoint: str
    tier: str
    files: int
    bytes: int
    failures: int
    session_seconds: float
    share_files: float                  # fractions of the campaign total, 0..1
    share_bytes: float
    share_sessions: float
    rate: float                         # bytes / second while it held sessions
    blackhole: bool                     # share_sessions >= BLACKHOLE_FACTOR x share_bytes


@dataclass(frozen=True)
class ShareReport:
    t0: float                           # unix time of the first attempt
    seconds: float
    endpoints: tuple[EndpointShare, ...]
    bins: tuple[ShareBin, ...]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def blackholes(self) -> list[str]:
        return [e.endpoint for e in self.endpoints if e.blackhole]


def endpoint_share(conn: sqlite3.Connection, *, bins: int = 12, tier: str | None = None,
                   now: float | None = None) -> ShareReport:
    sql = "SELECT endpoint, tier, started, ended, bytes, status FROM attempts"
    args: tuple = ()
    if tier is not None:
        sql += " WHERE tier = ?"
        args = (tier,)
    rows = conn.execute(sql, args).fetchall()
    if not rows:
        return ShareReport(0.0, 0.0, (), ())
    now = now if now is not None else time.time()
    t0 = min(r[2] for r in rows)
    t1 = max(max(r[3] if r[3] is not None else now, r[2]) for r in rows)
    span = max(t1 - t0, 1e-6)
    width = span / max(1, bins)
    edges = [(i * width, (i + 1) * width) for i in range(max(1, bins))]
    files = [dict() for _ in edges]
    nbytes = [dict() for _ in edges]
    sess = [dict() for _ in edges]
    tiers: dict[str, str] = {}
    tot: dict[str, list] = {}        # endpoint -> [files, bytes, failures, session_seconds]
    for ep, tr, started, ended, b, status in rows:
        tiers.setdefault(ep, tr)
        t = tot.setdefault(ep, [0, 0, 0, 0.0])
        a = started - t0
        z = (ended if ended is not None else now) - t0
        z = max(z, a)
        dur = z - a
        t[1] += b or 0
        t[3] += dur
        if status == "ok":
            t[0] += 1
            i = min(len(edges) - 1, int(z / width))
            files[i][ep] = files[i].get(ep, 0) + 1
        elif status == "failed":
            t[2] += 1
        first, last = int(a / width), min(len(edges) - 1, int(z / width))
        for i in range(min(first, len(edges) - 1), last + 1):
            lo, hi = edges[i]
            overlap = max(0.0, min(hi, z) - max(lo, a))
            if overlap <= 0 and dur > 0:
                continue
            sess[i][ep] = sess[i].get(ep, 0.0) + overlap / width
            share = overlap / dur if dur > 0 else 1.0
            nbytes[i][ep] = nbytes[i].get(ep, 0.0) + (b or 0) * share
    all_files = sum(v[0] for v in tot.values()) or 1
    all_bytes = sum(v[1] for v in tot.values()) or 1
    all_sess = sum(v[3] for v in tot.values()) or 1.0
    eps = []
    for ep in sorted(tot):
        f, b, fails, ss = tot[ep]
        sb, sn = b / all_bytes, ss / all_sess
        eps.append(EndpointShare(ep, tiers[ep], f, b, fails, round(ss, 3), f / all_files, sb, sn,
                                 b / ss if ss > 0 else 0.0,
                                 len(tot) > 1 and sn >= BLACKHOLE_FACTOR * sb and sn > 0.5 / len(tot)))
    out_bins = tuple(ShareBin(lo, hi, files[i], {k: round(v) for k, v in nbytes[i].items()},
                              {k: round(v, 2) for k, v in sess[i].items()})
                     for i, (lo, hi) in enumerate(edges))
    return ShareReport(t0, span, tuple(eps), out_bins)


def _short(url: str, width: int = 18) -> str:
    core = url.split("://", 1)[-1].rstrip("/")
    return core if len(core) <= width else "..." + core[-(width - 3):]


def render_share(report: ShareReport) -> str:
    """Totals per endpoint, then bytes% / sessions% per endpoint over time."""
    if not report.endpoints:
        return "no attempts yet"
    lines = [f"{'endpoint':<34} {'files':>6} {'bytes':>11} {'files%':>7} {'bytes%':>7} "
             f"{'sess%':>6} {'rate':>11}  note"]
    for e in report.endpoints:
        note = "BLACK HOLE: sessions pile up, bytes do not" if e.blackhole else ""
        if e.failures:
            note = (note + "; " if note else "") + f"{e.failures} failed attempts"
        lines.append(f"{e.endpoint[:34]:<34} {e.files:>6} {fmt_bytes(e.bytes):>11} "
                     f"{e.share_files:>7.0%} {e.share_bytes:>7.0%} {e.share_sessions:>6.0%} "
                     f"{fmt_rate(e.rate):>11}  {note}")
    names = [e.endpoint for e in report.endpoints]
    lines.append("")
    lines.append("share over time: bytes% / sessions% per endpoint")
    lines.append(f"{'time':>15}  " + "  ".join(f"{_short(n):>18}" for n in names))
    for b in report.bins:
        tb = sum(b.bytes.values()) or 1
        ts = sum(b.sessions.values()) or 1
        cells = [f"{b.bytes.get(n, 0) / tb:>8.0%} /{b.sessions.get(n, 0) / ts:>5.0%}" for n in names]
        span = f"{fmt_duration(b.start)}-{fmt_duration(b.end)}"
        lines.append(f"{span:>15}  " + "  ".join(f"{c:>18}" for c in cells))
    return "\n".join(lines)


def plot_share(report: ShareReport, axes: Any) -> None:
    """Two stack plots on ``axes`` (a pair of matplotlib Axes): bytes and sessions."""
    names = [e.endpoint for e in report.endpoints]
    mids = [(b.start + b.end) / 2 for b in report.bins]
    for ax, key, label in ((axes[0], "bytes", "share of bytes"),
                           (axes[1], "sessions", "share of sessions")):
        series = []
        for n in names:
            vals = []
            for b in report.bins:
                d = getattr(b, key)
                total = sum(d.values()) or 1
                vals.append(d.get(n, 0) / total)
            series.append(vals)
        ax.stackplot(mids, series, labels=[_short(n, 30) for n in names])
        ax.set_ylabel(label)
        ax.set_ylim(0, 1)
    axes[1].set_xlabel("seconds since start")
    axes[0].legend(loc="upper right", fontsize="small")
