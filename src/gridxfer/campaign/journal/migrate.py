"""Journal migrations: what a journal written by an older gridxfer lacks, added in place
when it is opened for writing (``store.connect``). Each step is idempotent and cheap
(no table is copied), so a million-file journal opens as fast as before.

Tape (issue 19):

- ``files.state`` also takes ``staging`` (a tape source not online yet: not dispatched)
  and ``archiving`` (copied and verified, the storage has not said "on tape" yet). The
  CHECK constraint of an older journal is widened by rewriting its text in
  ``sqlite_master`` (``PRAGMA writable_schema``), the procedure SQLite's own ALTER TABLE
  page gives for constraint changes that every stored row already satisfies; the
  schema cookie is bumped in the same transaction so every connection re-reads it.
- ``files.stage_requested``, ``staged``, ``copied``, ``on_tape`` (unix seconds, NULL
  until it happens): when the stage request went out, when the source was online, when
  the copy and its checksum ended, when the storage first said the file is on tape.
- two partial indexes over the files on tape (``TAPE_INDEXES``): status and report read
  a million-file tape tier's figures from them.

A read-only reader of a journal no runner has opened since (``has_tape``) sees none of
these; it reads the file as the older gridxfer did.
"""
from __future__ import annotations

import sqlite3

# The read side's tape figures on a million files without a table scan (report/tape.py):
# files on tape per tier by time (rates, counts) and by time to tape (percentiles).
TAPE_INDEXES = """
CREATE INDEX IF NOT EXISTS files_on_tape ON files (tier, on_tape, copied, size)
    WHERE state = 'done' AND on_tape IS NOT NULL;
CREATE INDEX IF NOT EXISTS files_to_tape ON files (tier, on_tape - copied)
    WHERE state = 'done' AND on_tape IS NOT NULL;
"""
INDEX_NAMES = frozenset({"files_on_tape", "files_to_tape"})
OLD_STATES = "('pending','active','done','failed')"
STATES = "('pending','staging','active','archiving','done','failed')"
TAPE_COLUMNS = ("stage_requested", "staged", "copied", "on_tape")


def upgrade(conn: sqlite3.Connection) -> None:
    """Bring the journal behind ``conn`` (autocommit, writable) to the current schema.
    Nothing is written unless something is missing (``store.connect`` has refused a
    damaged journal before: ``check.intact``)."""
    columns = not has_tape(conn) or OLD_STATES in _states_sql(conn)
    have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    indexes = not INDEX_NAMES.issubset(have)
    if not (columns or indexes):
        return
    if columns:
        _columns_and_states(conn)
    conn.executescript(TAPE_INDEXES)


def _columns_and_states(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        sql = _states_sql(conn)
        if OLD_STATES in sql:
            version = conn.execute("PRAGMA schema_version").fetchone()[0]
            conn.execute("PRAGMA writable_schema=ON")
            conn.execute("UPDATE sqlite_master SET sql=? WHERE type='table' AND name='files'",
                         (sql.replace(OLD_STATES, STATES),))
            conn.execute(f"PRAGMA schema_version={int(version) + 1}")
            conn.execute("PRAGMA writable_schema=OFF")
        have = _columns(conn)
        for col in TAPE_COLUMNS:
            if col not in have:
                conn.execute(f"ALTER TABLE files ADD COLUMN {col} REAL")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def has_tape(conn: sqlite3.Connection) -> bool:
    """The journal has the tape columns (a runner of this version opened it)."""
    return set(TAPE_COLUMNS) <= _columns(conn)


def _columns(conn: sqlite3.Connection) -> set[str]:
    return {row[1] for row in conn.execute("PRAGMA table_info(files)")}


def _states_sql(conn: sqlite3.Connection) -> str:
    row = conn.execute("SELECT sql FROM sqlite_master WHERE type='table' AND name='files'"
                       ).fetchone()
    return row[0] if row else ""
