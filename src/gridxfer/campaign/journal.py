"""The campaign journal: one SQLite database (WAL) per campaign, the single source of
truth for resume, status, report and the monitoring sources.

Location: ``$GRIDXFER_HOME/campaigns/<campaign>.sqlite`` (mode 0600).

Tables (column names are a contract: ``gridxfer.monitoring.sources.journal`` reads them):

- ``meta(key, value)``: campaign name, spec (JSON), created, state.
- ``files``: one row per (source file, destination tier). ``state`` is one of
  pending | active | done | failed. ``endpoint``/``dst_url`` are set once placed.
- ``attempts``: one row per transfer attempt: started/ended (unix seconds), bytes,
  rate (bytes/s), endpoint, tier, streams, status (active|ok|failed|cancelled),
  error_class (``gridxfer.errors.ErrorClass`` value), error_msg.
- ``events``: campaign events (started, interrupted, resumed, excluded endpoint,
  optimizer decisions...), ``detail`` is JSON.
"""
from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterable

from ..errors import UsageError
from ..state import subdir

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,              -- relative name under the source base
    src_url TEXT NOT NULL,
    size INTEGER NOT NULL,
    tier TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending','active','done','failed')),
    endpoint TEXT,
    dst_url TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    checksum TEXT,
    error_class TEXT,
    error_msg TEXT,
    not_before REAL NOT NULL DEFAULT 0,   -- retry backoff: not dispatched before this time
    updated REAL NOT NULL DEFAULT 0,
    UNIQUE (src_url, tier)
);
CREATE INDEX IF NOT EXISTS files_state ON files (state, tier);
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
    error_msg TEXT
);
CREATE INDEX IF NOT EXISTS attempts_ended ON attempts (ended);
CREATE INDEX IF NOT EXISTS attempts_file ON attempts (file_id);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,
    ts REAL NOT NULL,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '{}'
);
"""

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def journal_dir() -> Path:
    return subdir("campaigns")


def journal_path(name: str) -> Path:
    if not _NAME_RE.fullmatch(name):
        raise UsageError(f"bad campaign name {name!r}: use letters, digits, '.', '_' and '-'")
    return journal_dir() / f"{name}.sqlite"


def list_journals() -> list[Path]:
    return sorted(journal_dir().glob("*.sqlite"))


def connect(path: Path, *, create: bool = False, readonly: bool = False) -> sqlite3.Connection:
    """Open a journal. WAL mode, synchronous=NORMAL (WAL keeps it crash-safe)."""
    path = Path(path)
    if not create and not path.exists():
        raise UsageError(f"no such campaign journal: {path}")
    if readonly:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30,
                               check_same_thread=False)
    else:
        fresh = not path.exists()
        conn = sqlite3.connect(path, timeout=30, check_same_thread=False, isolation_level=None)
        if fresh:
            os.chmod(path, 0o600)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(SCHEMA)
    conn.row_factory = sqlite3.Row
    return conn


def add_event(conn: sqlite3.Connection, kind: str, ts: float | None = None, **detail: Any) -> None:
    conn.execute("INSERT INTO events (ts, kind, detail) VALUES (?, ?, ?)",
                 (ts if ts is not None else time.time(), kind, json.dumps(detail, sort_keys=True)))


def set_meta(conn: sqlite3.Connection, items: Iterable[tuple[str, str]]) -> None:
    conn.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", list(items))


def get_meta(conn: sqlite3.Connection) -> dict[str, str]:
    return {row["key"]: row["value"] for row in conn.execute("SELECT key, value FROM meta")}
