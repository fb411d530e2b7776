"""Entry points the campaign API calls for an FTS3 campaign: ``run`` (submit and poll, in
the caller's thread), ``cancel`` (the campaign's unfinished FTS3 jobs), ``totals``.

The journal's ``meta.state`` and events are those of a local run (``started``,
``interrupted``, ``finished``), so ``status``, ``report`` and the Nagios checks read an
FTS3 campaign as any other; ``started`` says ``engine: fts3`` and the endpoint.
"""
from __future__ import annotations

import os
import sqlite3
import threading
import time
from dataclasses import dataclass

from collections.abc import Callable, Sequence

from gridxfer.campaign.accounting.stats import LinkSnapshot, StatsSnapshot
from gridxfer.campaign.fts3 import record
from gridxfer.auth.tokens import Token
from gridxfer.campaign.fts3.client import UNREAD, Fts3Client
from gridxfer.campaign.fts3.engine import Fts3Engine, Fts3Run
from gridxfer.campaign.fts3.states import TERMINAL
from gridxfer.campaign.journal import store
from gridxfer.campaign.spec.model import CampaignSpec

__all__ = ["Cancelled", "Fts3Run", "cancel", "run", "totals"]




@dataclass(frozen=True)
class Totals:
    files: int
    done: int
    failed: int
    bytes: int
    bytes_done: int


def totals(conn: sqlite3.Connection) -> Totals:
    tally = store.tally(conn)
    files = sum(n for st in tally.values() for n, _ in st.values())
    nbytes = sum(b for st in tally.values() for _, b in st.values())
    done = [sum(st.get("done", (0, 0))[i] for st in tally.values()) for i in (0, 1)]
    failed = sum(st.get("failed", (0, 0))[0] for st in tally.values())
    return Totals(files, done[0], failed, nbytes, done[1])


RUNNING = frozenset({"ACTIVE", "READY", "SELECTED"})    # FTS3 file states: on the wire
SCHEDULED = "FTS3 schedules"    # the link's "optimizer" column: no cap of gridxfer's


def links(conn: sqlite3.Connection, tally: dict[str, dict[str, tuple[int, int]]],
          elapsed: float) -> tuple[LinkSnapshot, ...]:
    """The live view's per-link (tier) rows, from the journal: ``active`` = files FTS3
    reports on the wire (ACTIVE, READY, SELECTED), ``queued`` = files in any other
    unfinished FTS3 state (SUBMITTED, STAGING, ON_HOLD...) plus those waiting in the
    journal for a (re)submission; ``rate`` is the tier's mean (FTS3 reports a file's bytes
    when it ends). ``cap`` is the running count: FTS3, not gridxfer, sets the concurrency."""
    done = tuple(sorted(TERMINAL | {"ARCHIVING"}))
    server: dict[str, list[int]] = {}
    for tier, state, n in conn.execute(
            "SELECT a.tier, f.fts_state, count(*) FROM fts3_files f JOIN attempts a "
            f"ON a.id = f.attempt_id WHERE f.fts_state NOT IN ({','.join('?' * len(done))}) "
            "GROUP BY 1, 2", done):
        server.setdefault(tier, [0, 0])[0 if state in RUNNING else 1] += n
    out = []
    for tier, st in sorted(tally.items()):
        active, queued = server.get(tier, [0, 0])
        done_n, done_b = st.get("done", (0, 0))
        out.append(LinkSnapshot(
            tier=tier, active=active, cap=active, reason=SCHEDULED,
            queued=queued + st.get("pending", (0, 0))[0],
            files_total=sum(n for n, _ in st.values()), done=done_n,
            failed=st.get("failed", (0, 0))[0],
            bytes_total=sum(b for _, b in st.values()), bytes_done=done_b,
            rate=done_b / max(elapsed, 1e-3), archiving=st.get("archiving", (0, 0))[0]))
    return tuple(out)


def snapshot(conn: sqlite3.Connection, t0: float, now: float) -> StatsSnapshot:
    """The live view's figures after a poll, from the journal: totals, and per link
    (``links``) the FTS3 states of its files."""
    t = totals(conn)
    tally = store.tally(conn)
    active = sum(st.get(k, (0, 0))[0] for st in tally.values() for k in ("active", "staging"))
    archiving = sum(st.get("archiving", (0, 0))[0] for st in tally.values())
    failures = dict(conn.execute("SELECT error_class, count(*) FROM attempts WHERE "
                                 "status='failed' GROUP BY error_class").fetchall())
    retries = conn.execute("SELECT count(*) FROM files WHERE state='pending' AND attempts > 0"
                           ).fetchone()[0]
    elapsed = max(now - t0, 1e-3)
    rate = t.bytes_done / elapsed
    left = t.bytes - t.bytes_done
    return StatsSnapshot(now, elapsed, t.files, t.done, t.failed, active, t.bytes,
                         t.bytes_done, rate, rate, left / rate if rate > 0 else None,
                         retries, failures, links(conn, tally, elapsed), (),
                         files_archiving=archiving)


def run(conn: sqlite3.Connection, spec: CampaignSpec, stop: threading.Event,
        client: Fts3Client | None = None,
        observers: Sequence[Callable[[StatsSnapshot], None]] = (),
        token: Token | None | object = UNREAD) -> Fts3Run:
    client = client or Fts3Client(spec.engine, token)
    store.set_meta(conn, [("state", "running"), ("engine", "fts3")])
    store.add_event(conn, "started", engine="fts3", endpoint=spec.engine.endpoint,
                    pid=os.getpid(), selector="throughput-aware")
    t0 = time.time()
    engine = Fts3Engine(conn, spec, client, stop=stop, observe=lambda: [
        o(snapshot(conn, t0, time.time())) for o in observers])
    try:
        out = engine.run()
    except BaseException:
        store.set_meta(conn, [("state", "interrupted")])
        store.add_event(conn, "interrupted", signal=None, in_flight=len(record.open_jobs(conn)))
        raise
    t = totals(conn)
    if out.state == "interrupted":
        store.add_event(conn, "interrupted", signal=None if out.paused else "SIGINT",
                        in_flight=len(record.open_jobs(conn)))
    else:
        store.add_event(conn, "finished", done=t.done, failed=t.failed,
                        seconds=round(time.time() - t0, 3))
    store.set_meta(conn, [("state", out.state)])
    return out


@dataclass(frozen=True)
class Cancelled:
    jobs: int                   # jobs the server cancelled
    unknown: int                # jobs the server had no record of: their files cancelled here


def cancel(conn: sqlite3.Connection, spec: CampaignSpec,
           client: Fts3Client | None = None) -> Cancelled:
    """Cancel the campaign's unfinished FTS3 jobs (server side), then poll them once: the
    cancelled jobs' files are written as cancelled, and so are those of a job the server
    has no record of (purged, a damaged journal, or a job a killed run never posted)."""
    record.ensure(conn)
    doubt = [j for j, _ in record.in_doubt(conn)]
    ids = record.open_jobs(conn) + doubt
    if not ids:
        return Cancelled(0, 0)
    client = client or Fts3Client(spec.engine)
    n = client.cancel(ids)
    for jid in doubt:           # now cancelled on the server, or unknown to it: never posted
        record.submitted(conn, jid)
    engine = Fts3Engine(conn, spec, client)
    engine.apply.cancelling = True
    engine.poll()
    return Cancelled(n, len(engine.apply.unknown))
