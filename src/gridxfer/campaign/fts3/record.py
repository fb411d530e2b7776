"""The FTS3 engine's journal writes: the same ``files`` and ``attempts`` rows as a local
run (every reader works unchanged), plus two tables of its own.

- ``fts3_jobs(job_id, sid, tier, endpoint, round, body, submitted, state)``: a job is
  written with ``submitted=0`` and its attempts in ONE transaction BEFORE it is posted,
  and marked ``submitted=1`` after. A run killed in between leaves ``submitted=0``; the
  resume asks the server for that job id (deterministic: the same sid gives the same id)
  and posts ``body`` again only if the server has no such job: no file is submitted twice.
- ``fts3_files(attempt_id, job_id, file_id, fts_state)``: which attempt is which FTS3 file.

A job the server has no record of (purged from its database, or a damaged journal naming
another server's job) gets the state ``NOT_FOUND`` (``NO_JOB``): no longer polled.

No credential is stored: a job body carries URLs (checked credential-free at plan time),
metadata and parameters, never a token: the per-file tokens are left out
(``jobs.without_tokens``) and a resubmission asks for them again.
"""
from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterable, Iterator

from gridxfer.campaign.fts3.jobs import JobPlan, without_tokens
from gridxfer.campaign.journal import store
from gridxfer.redact import redact

SCHEMA = """
CREATE TABLE IF NOT EXISTS fts3_jobs (
    job_id TEXT PRIMARY KEY, sid TEXT NOT NULL, tier TEXT NOT NULL, endpoint TEXT NOT NULL,
    round INTEGER NOT NULL, body TEXT NOT NULL, submitted INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL DEFAULT 'SUBMITTED', created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS fts3_files (
    attempt_id INTEGER PRIMARY KEY, job_id TEXT NOT NULL, file_id INTEGER NOT NULL,
    fts_state TEXT NOT NULL DEFAULT 'SUBMITTED');
CREATE INDEX IF NOT EXISTS fts3_files_job ON fts3_files (job_id);
"""
NO_JOB = "NOT_FOUND"            # fts3_jobs.state of a job the server does not know
OPEN_JOBS = "SELECT job_id FROM fts3_jobs WHERE submitted=1 AND state NOT IN " \
            "('FINISHED','FAILED','FINISHEDDIRTY','CANCELED','NOT_FOUND') ORDER BY created"


def ensure(conn: sqlite3.Connection) -> None:
    conn.executescript(SCHEMA)


@contextlib.contextmanager
def txn(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One transaction (the journal's connection is in autocommit mode)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def intend(conn: sqlite3.Connection, job_id: str, plan: JobPlan, round_: int,
           dst: dict[int, str], streams: int, staging: bool, now: float) -> None:
    """The job and its attempts, before the POST (one transaction)."""
    first = store.next_attempt_id(conn)
    state = "staging" if staging else "active"
    body = redact(json.dumps(without_tokens(plan.job)))
    with txn(conn):
        conn.execute("INSERT INTO fts3_jobs (job_id, sid, tier, endpoint, round, body, created)"
                     " VALUES (?,?,?,?,?,?,?)", (job_id, plan.sid, plan.tier, plan.endpoint,
                                                 round_, body, now))
        for n, fid in enumerate(plan.file_ids):
            aid = first + n
            conn.execute("INSERT INTO attempts (id, file_id, tier, endpoint, dst_url, started, "
                         "streams, mode) VALUES (?,?,?,?,?,?,?, 'fts3')",
                         (aid, fid, plan.tier, plan.endpoint, dst[fid], now, streams))
            conn.execute("INSERT INTO fts3_files (attempt_id, job_id, file_id, fts_state) "
                         "VALUES (?,?,?,?)", (aid, job_id, fid,
                                              "STAGING" if staging else "SUBMITTED"))
            conn.execute("UPDATE files SET state=?, endpoint=?, dst_url=?, attempts=attempts+1,"
                         " stage_requested=CASE WHEN ? THEN ? ELSE stage_requested END, "
                         "updated=? WHERE id=?",
                         (state, plan.endpoint, dst[fid], staging, now, now, fid))


def submitted(conn: sqlite3.Connection, job_id: str) -> None:
    with txn(conn):
        conn.execute("UPDATE fts3_jobs SET submitted=1 WHERE job_id=?", (job_id,))


def in_doubt(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """(job_id, body) of jobs written but maybe never posted (a run killed between)."""
    return [(r[0], r[1]) for r in conn.execute(
        "SELECT job_id, body FROM fts3_jobs WHERE submitted=0 ORDER BY created")]


def open_jobs(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute(OPEN_JOBS)]


def attempts_of(conn: sqlite3.Connection, job_id: str) -> dict[int, tuple[int, str, str]]:
    """file_id -> (attempt_id, fts_state, tier) of the job's files."""
    return {r[1]: (r[0], r[2], r[3]) for r in conn.execute(
        "SELECT f.attempt_id, f.file_id, f.fts_state, a.tier FROM fts3_files f "
        "JOIN attempts a ON a.id = f.attempt_id WHERE f.job_id=?", (job_id,))}


def job_state(conn: sqlite3.Connection, job_id: str, state: str) -> None:
    conn.execute("UPDATE fts3_jobs SET state=? WHERE job_id=?", (state, job_id))


def file_state(conn: sqlite3.Connection, attempt_id: int, state: str) -> None:
    conn.execute("UPDATE fts3_files SET fts_state=? WHERE attempt_id=?", (state, attempt_id))


def job_ids(conn: sqlite3.Connection, *, unfinished: bool = True) -> list[str]:
    return open_jobs(conn) if unfinished else [
        r[0] for r in conn.execute("SELECT job_id FROM fts3_jobs ORDER BY created")]


def pending_rows(conn: sqlite3.Connection, now: float) -> Iterable[sqlite3.Row]:
    """Files waiting for a (re)submission, their backoff over."""
    return conn.execute(
        "SELECT id, name, src_url, size, tier, expected_checksum, attempts FROM files "
        "WHERE state='pending' AND not_before <= ? ORDER BY id", (now,)).fetchall()
