"""The campaign journal: one SQLite database (WAL) per campaign, the single source of
truth for resume, status, report and the monitoring sources.

Location: ``$GRIDXFER_HOME/campaigns/<campaign>.sqlite`` (mode 0600; 0640 in a set-group-ID
campaigns directory, which its group, e.g. ``nagios``, may then read: ``state.shared_mode``).

Tables (column names are a contract: ``gridxfer.monitoring.sources.journal`` reads them):

- ``meta(key, value)``: campaign name, spec (JSON), created, state.
- ``files``: one row per (source file, destination tier). ``state`` is one of
  pending | staging | active | archiving | done | failed (staging: a tape source not
  online yet; archiving: copied, not on tape yet; the tape columns: ``migrate.py``).
  ``endpoint``/``dst_url`` are set once placed.
  A file taken out by ``gridxfer campaign cancel`` is ``state='failed'`` with
  ``error_class='cancelled'`` (``CANCELLED``; no other path fails a file with that
  class): every reader keeps working, ``resume`` leaves it alone and says so, and
  ``resume --retry-cancelled`` (or ``--retry-failed``) brings it back.
- ``attempts``: one row per transfer attempt: started/ended (unix seconds), bytes,
  rate (bytes/s), endpoint, tier, streams, status (active|ok|failed|cancelled),
  error_class (``gridxfer.errors.ErrorClass`` value), error_msg. ``tmp_url``: the
  temporary name the mover must write to, chosen and committed with the row BEFORE the
  transfer starts; set while that name may exist at the destination, NULL once it was
  renamed into place (ok), never created, or removed by ``resume``/``cancel``
  (``recovery.sweep``). Index ``attempts_tmp`` finds the ended attempts still holding one.
- ``events``: campaign events (started, interrupted, resumed, excluded endpoint,
  optimizer decisions...), ``detail`` is JSON.

Event kinds written by the scheduler (``detail`` keys in brackets):
``planned`` {files, tiers}, ``started`` {selector, pid}, ``resumed`` {recovered},
``recovered`` {file_id, attempt_id, outcome}, ``optimizer`` (optimizer_log.decision_event),
``excluded`` {tier, url, reason, until}, ``readmitted`` {tier, url} (exclusion_log.exclusion_event),
``pool_down`` {tier, since, deadline, reason, on_pool_down}, ``pool_up`` {tier},
``pool_failed`` {tier, files, reason} (pooldown.py),
``interrupted`` {signal, in_flight}, ``finished`` {done, failed, seconds},
``cancelled`` {files, pid} (``campaign cancel``: files marked, or the runner signalled).
``verified`` {checked, requeued, removed} (``campaign verify --fix``: missing and different
files put back to pending, bad copies removed).
``meta.state`` is one of planned | running | interrupted | done | partial | cancelled.

No credential is ever stored: every text written here and by ``ledger`` passes through
``gridxfer.redact.redact``. A source whose URL carries one (a listed name such as
``f?authz=...``) is journalled masked and failed at once (``planning.CREDENTIAL_FAILURE``).
"""
from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from pathlib import Path
from typing import Any
from collections.abc import Iterable, Iterator

from gridxfer.errors import UsageError
from gridxfer.redact import redact, redact_obj
from gridxfer.state import shared_mode, subdir
from gridxfer.campaign.journal import check as journalcheck
from gridxfer.campaign.journal import migrate

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,              -- relative name under the source base
    src_url TEXT NOT NULL,
    size INTEGER NOT NULL,
    tier TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending','staging','active','archiving','done','failed')),
    endpoint TEXT,
    dst_url TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    checksum TEXT,
    error_class TEXT,
    error_msg TEXT,
    not_before REAL NOT NULL DEFAULT 0,   -- retry backoff: not dispatched before this time
    updated REAL NOT NULL DEFAULT 0,
    expected_checksum TEXT,               -- known source adler32 (from the spec), if any
    stage_requested REAL, staged REAL, copied REAL, on_tape REAL,   -- tape (migrate.py)
    UNIQUE (src_url, tier)
);
CREATE INDEX IF NOT EXISTS files_state ON files (state, tier);
CREATE INDEX IF NOT EXISTS files_tally ON files (tier, state, size);
CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id),
    tier TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    dst_url TEXT NOT NULL,
    started REAL NOT NULL,
    ended REAL,
    bytes INTEGER NOT NULL DEFAULT 0,
    rate REAL,
    streams INTEGER,
    mode TEXT,
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active','ok','failed','cancelled')),
    error_class TEXT,
    error_msg TEXT,
    tmp_url TEXT                     -- temporary name at the destination, when the mover says
);
CREATE INDEX IF NOT EXISTS attempts_ended ON attempts (ended);
CREATE INDEX IF NOT EXISTS attempts_file ON attempts (file_id);
CREATE INDEX IF NOT EXISTS attempts_active ON attempts (id) WHERE status = 'active';
CREATE INDEX IF NOT EXISTS attempts_tmp ON attempts (id)
    WHERE tmp_url IS NOT NULL AND status <> 'active';
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,
    ts REAL NOT NULL,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS events_kind ON events (kind, id);
"""

CANCELLED = "cancelled"     # files.error_class of a file `campaign cancel` took out

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def journal_dir() -> Path:
    return subdir("campaigns")


def journal_path(name: str) -> Path:
    if not _NAME_RE.fullmatch(name):
        raise UsageError(f"bad campaign name {name!r}: use letters, digits, '.', '_' and '-'")
    return journal_dir() / f"{name}.sqlite"


def list_journals() -> list[Path]:
    return sorted(journal_dir().glob("*.sqlite"))


def connect(path: Path, *, create: bool = False, readonly: bool = False,
            every_page: bool = True) -> sqlite3.Connection:
    """Open a journal. WAL mode, synchronous=NORMAL (WAL keeps it crash-safe).
    ``every_page=False``: a writer skips SQLite's ``integrity_check`` (1.7 s on a million
    files), for a journal that is deleted once this connection is done with it."""
    path = Path(path)
    if not create and not path.exists():
        raise UsageError(f"no such campaign journal: {path}")
    fresh = not path.exists()
    if not fresh:
        # refuse another program's file, or a damaged one, before writing to it
        journalcheck.verify(path, pages=every_page and not readonly)
    with journalcheck.reading(path):
        if readonly:
            conn = sqlite3.connect(journalcheck.ro_uri(path), uri=True, timeout=30,
                                   check_same_thread=False)
        else:
            conn = sqlite3.connect(path, timeout=30, check_same_thread=False,
                                   isolation_level=None)
            if fresh:       # SQLite gives -wal and -shm the same mode
                os.chmod(path, shared_mode(path.parent))
            else:           # damaged anywhere (verify: intact): refused before any write
                journalcheck.numbers(conn)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(SCHEMA)
            migrate.upgrade(conn)
    conn.row_factory = sqlite3.Row
    return conn


def add_event(conn: sqlite3.Connection, kind: str, ts: float | None = None, **detail: Any) -> None:
    conn.execute("INSERT INTO events (ts, kind, detail) VALUES (?, ?, ?)",
                 (ts if ts is not None else time.time(), kind,
                  json.dumps(redact_obj(detail), sort_keys=True)))


def set_meta(conn: sqlite3.Connection, items: Iterable[tuple[str, str]]) -> None:
    conn.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                     [(k, redact(v)) for k, v in items])


def get_meta(conn: sqlite3.Connection) -> dict[str, str]:
    return {row["key"]: row["value"] for row in conn.execute("SELECT key, value FROM meta")}


# ------------------------------------------------------------------ queries (read side)
def tally(conn: sqlite3.Connection, *,
          indexed: bool = True) -> dict[str, dict[str, tuple[int, int]]]:
    """{tier: {state: (files, bytes)}} from the covering index ``files_tally`` (no table scan);
    ``indexed=False`` where ``files`` is a filtered view (``report/filters.py``)."""
    out: dict[str, dict[str, tuple[int, int]]] = {}
    hint = " INDEXED BY files_tally" if indexed else ""
    for tier, state, n, b in conn.execute(
            f"SELECT tier, state, count(*), total(size) FROM files{hint} "
            "GROUP BY tier, state"):
        out.setdefault(tier, {})[state] = (n, int(b))
    return out


def fetch_pending(conn: sqlite3.Connection, tier: str, after_id: int,
                  limit: int) -> list[sqlite3.Row]:
    """The next ``limit`` pending files of a tier with id > after_id (index files_state)."""
    return conn.execute(
        "SELECT id, name, src_url, size, attempts, not_before, expected_checksum FROM files "
        "WHERE state = 'pending' AND tier = ? AND id > ? ORDER BY id LIMIT ?",
        (tier, after_id, limit)).fetchall()


def active_attempts(conn: sqlite3.Connection) -> list[sqlite3.Row]:
    """Attempts left 'active' (the process died or was killed): partial index, no scan."""
    return conn.execute(
        "SELECT a.id, a.file_id, a.tier, a.endpoint, a.dst_url, a.tmp_url, a.started, "
        "f.src_url, f.size, f.expected_checksum, f.state AS file_state FROM attempts a "
        "INDEXED BY attempts_active JOIN files f ON f.id = a.file_id "
        "WHERE a.status = 'active'").fetchall()


def leftover_temps(conn: sqlite3.Connection) -> list[sqlite3.Row]:
    """Ended attempts whose temporary name may still exist (index attempts_tmp)."""
    return conn.execute(
        "SELECT id, endpoint, dst_url, tmp_url FROM attempts INDEXED BY attempts_tmp "
        "WHERE tmp_url IS NOT NULL AND status <> 'active'").fetchall()


def count_cancelled(conn: sqlite3.Connection) -> int:
    """Files `campaign cancel` took out (index files_state, then failed rows only)."""
    return conn.execute("SELECT count(*) FROM files WHERE state = 'failed' AND error_class = ?",
                        (CANCELLED,)).fetchone()[0]


def orphan_active_files(conn: sqlite3.Connection) -> list[sqlite3.Row]:
    """Files marked active without an active attempt (a crash between the two writes)."""
    return conn.execute(
        "SELECT id, tier, dst_url FROM files WHERE state = 'active' AND NOT EXISTS "
        "(SELECT 1 FROM attempts a INDEXED BY attempts_active "
        " WHERE a.status = 'active' AND a.file_id = files.id)").fetchall()


def last_events(conn: sqlite3.Connection, kind: str, limit: int = 1000) -> Iterator[dict[str, Any]]:
    for row in conn.execute("SELECT ts, detail FROM events WHERE kind = ? ORDER BY id DESC LIMIT ?",
                            (kind, limit)):
        d = json.loads(row[1])
        d["ts"] = row[0]
        yield d


def next_attempt_id(conn: sqlite3.Connection) -> int:
    return (conn.execute("SELECT max(id) FROM attempts").fetchone()[0] or 0) + 1
