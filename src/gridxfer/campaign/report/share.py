"""Per-endpoint share of files, bytes and sessions over time, from a campaign journal.

A black hole shows as an endpoint that holds a growing share of the *sessions* while
its share of the *bytes* stays small: sessions pile up on it because it is slow. Its
absence shows as session and byte shares that track each other. An endpoint that refuses
connections holds no session, however long its client took to give up: attempts that
failed with a ``connection`` error count in its failures, never towards a black hole.

Each attempt's bytes are spread evenly over its duration; sessions are the mean number
of attempts in flight per time bin; files count at the end of their successful attempt.

    endpoint_share(conn, bins=12) -> ShareReport     # typed result (to_dict for --json)
    render_share(report) -> str                      # the text table for `campaign report`
"""
from __future__ import annotations

import sqlite3
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from gridxfer.redact import redact
from gridxfer.units import fmt_bytes, fmt_duration, fmt_rate
from gridxfer.campaign.report.intervals import overlap

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
    blackhole: bool                     # share of sessions held (connected attempts only)
                                        # >= BLACKHOLE_FACTOR x share_bytes


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
    sql = ("SELECT endpoint, tier, started, coalesce(ended, ?), coalesce(bytes, 0), "
           "status = 'ok', status = 'failed', coalesce(error_class, '') = 'connection' "
           "FROM attempts")
    args: tuple = (now if now is not None else time.time(),)
    if tier is not None:
        sql += " WHERE tier = ?"
        args += (tier,)
    cur = conn.cursor()
    cur.row_factory = None                  # plain tuples: 3x faster on 100 k attempts
    rows = cur.execute(sql, args).fetchall()
    if not rows:
        return ShareReport(0.0, 0.0, (), ())
    cols = list(zip(*rows, strict=True))
    ep_all = np.array(cols[0], dtype=object)
    start = np.array(cols[2], dtype=float)
    end = np.maximum(np.array(cols[3], dtype=float), start)
    nb = np.array(cols[4], dtype=float)
    is_ok = np.array(cols[5], dtype=bool)
    is_failed = np.array(cols[6], dtype=bool)
    refused = np.array(cols[7], dtype=bool)         # never connected: held no session
    t0 = float(start.min())
    span = max(float(end.max()) - t0, 1e-6)
    n = max(1, bins)
    width = span / n
    edges = np.arange(n + 1) * width
    s, e = start - t0, end - t0
    dur = e - s
    tiers = dict(zip(cols[0], cols[1], strict=True))
    names = sorted(set(cols[0]))
    files_b: dict[str, np.ndarray] = {}
    bytes_b: dict[str, np.ndarray] = {}
    sess_b: dict[str, np.ndarray] = {}
    tot: dict[str, tuple[int, int, int, float]] = {}
    held: dict[str, float] = {}                     # session seconds of connected attempts
    for ep in names:
        m = ep_all == ep
        ok = m & is_ok
        idx = np.minimum((e[ok] // width).astype(int), n - 1)
        files_b[ep] = np.bincount(idx, minlength=n)
        sess_b[ep] = np.diff(overlap(s[m], e[m], np.ones(int(m.sum())), edges)) / width
        timed = m & (dur > 0)
        spread = np.diff(overlap(s[timed], e[timed], nb[timed] / dur[timed], edges))
        instant = m & (dur <= 0)               # zero-length attempts: bytes at their start
        spread += np.bincount(np.minimum((s[instant] // width).astype(int), n - 1),
                              weights=nb[instant], minlength=n)
        bytes_b[ep] = spread
        tot[ep] = (int(ok.sum()), int(nb[m].sum()), int((m & is_failed).sum()),
                   float(dur[m].sum()))
        held[ep] = float(dur[m & ~refused].sum())
    all_files = sum(v[0] for v in tot.values()) or 1
    all_bytes = sum(v[1] for v in tot.values()) or 1
    all_sess = sum(v[3] for v in tot.values()) or 1.0
    all_held = sum(held.values()) or 1.0
    eps = []
    for ep in names:
        f, b, fails, ss = tot[ep]
        sb, sn, sh = b / all_bytes, ss / all_sess, held[ep] / all_held
        hole = (len(tot) > 1 and held[ep] > 0 and sh >= BLACKHOLE_FACTOR * sb
                and sh > 0.5 / len(tot))
        eps.append(EndpointShare(ep, tiers[ep], f, b, fails, round(ss, 3), f / all_files, sb, sn,
                                 b / ss if ss > 0 else 0.0, hole))
    out_bins = tuple(ShareBin(
        float(edges[i]), float(edges[i + 1]),
        {ep: int(files_b[ep][i]) for ep in names if files_b[ep][i]},
        {ep: round(float(bytes_b[ep][i])) for ep in names if bytes_b[ep][i] > 0.5},
        {ep: round(float(sess_b[ep][i]), 2) for ep in names if sess_b[ep][i] > 0.005})
        for i in range(n))
    return ShareReport(t0, span, tuple(eps), out_bins)


def render_share(report: ShareReport, names: dict[str, str] | None = None,
                 width: int | None = None) -> str:
    """Totals per endpoint, then bytes% / sessions% per endpoint over time; endpoints by
    their names (``journal/names.py``), never cut. Within ``width`` the totals leave out
    the rate, and the table over time shows the endpoints that fit and says how many not."""
    if not report.endpoints:
        return "no attempts yet"
    from gridxfer.campaign.journal.names import name_of
    shown = {e.endpoint: redact(name_of(names or {}, e.endpoint)) for e in report.endpoints}
    w = max(8, *(len(n) for n in shown.values()))
    narrow = width is not None and w + 49 > width
    lines = [f"{'endpoint':<{w}} {'files':>6} {'bytes':>9} {'files%':>6} {'bytes%':>6} "
             f"{'sess%':>5}" + ("" if narrow else f" {'rate':>11}") + "  note"]
    for e in report.endpoints:
        note = "BLACK HOLE: sessions pile up, bytes do not" if e.blackhole else ""
        if e.failures:
            note = (note + "; " if note else "") + f"{e.failures} failed attempts"
        lines.append(f"{shown[e.endpoint]:<{w}} {e.files:>6} {fmt_bytes(e.bytes):>9} "
                     f"{e.share_files:>6.0%} {e.share_bytes:>6.0%} {e.share_sessions:>5.0%}"
                     + ("" if narrow else f" {fmt_rate(e.rate):>11}") + f"  {note}".rstrip())
    urls = [e.endpoint for e in report.endpoints]
    cw = max(11, *(len(shown[u]) for u in urls))
    fits = len(urls) if width is None else max(1, (width - 11) // (cw + 2))
    lines.append("")
    lines.append("share over time: bytes% / sessions% per endpoint"
                 + (f" (the first {fits} of {len(urls)}; all with --json)"
                    if fits < len(urls) else ""))
    urls = urls[:fits]
    lines.append(f"{'time':>11}  " + "  ".join(f"{shown[u]:>{cw}}" for u in urls))
    for b in report.bins:
        tb = sum(b.bytes.values()) or 1
        ts = sum(b.sessions.values()) or 1
        cells = [f"{b.bytes.get(u, 0) / tb:.0%} / {b.sessions.get(u, 0) / ts:.0%}" for u in urls]
        span = f"{fmt_duration(b.start)}-{fmt_duration(b.end)}"
        lines.append(f"{span:>11}  " + "  ".join(f"{c:>{cw}}" for c in cells))
    return "\n".join(lines)
