"""An older journal (no tape states or columns) opens, is upgraded in place, and keeps
its rows; a fresh one has everything from the start."""
from __future__ import annotations

import gc
import sqlite3

import pytest

from gridxfer.campaign.journal import migrate
from gridxfer.campaign.journal import store as journal

# The files table as gridxfer wrote it before the tape states (commit d649824).
OLD_SCHEMA = journal.SCHEMA.replace(
    "'pending','staging','active','archiving','done','failed'",
    "'pending','active','done','failed'").replace(
    "    stage_requested REAL, staged REAL, copied REAL, on_tape REAL,   -- tape (migrate.py)\n",
    "")


def _old_journal(path):
    assert "archiving" not in OLD_SCHEMA and "on_tape" not in OLD_SCHEMA
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(OLD_SCHEMA)
    conn.execute("INSERT INTO files (name, src_url, size, tier, state) "
                 "VALUES ('a', 'root://h//a', 3, 'T1', 'done')")
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("UPDATE files SET state='archiving'")
    conn.close()


def test_an_old_journal_is_upgraded_in_place_and_keeps_its_rows(gridxfer_home):
    path = journal.journal_path("old")
    path.parent.mkdir(parents=True, exist_ok=True)
    _old_journal(path)
    ro = journal.connect(path, readonly=True)         # a reader sees the old journal as is
    assert not migrate.has_tape(ro)
    ro.close()
    conn = journal.connect(path)
    assert migrate.has_tape(conn)
    assert [tuple(r) for r in conn.execute("SELECT name, state, on_tape FROM files")] == [
        ("a", "done", None)]
    conn.execute("UPDATE files SET state='archiving', copied=1.5")
    conn.execute("UPDATE files SET state='staging'")
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("UPDATE files SET state='bogus'")
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    again = journal.connect(path)                      # idempotent
    assert tuple(again.execute("SELECT state, copied FROM files").fetchone()) == ("staging", 1.5)
    other = sqlite3.connect(path)                      # another connection sees the new CHECK
    other.execute("UPDATE files SET state='archiving'")
    other.commit()


def test_a_fresh_journal_has_the_tape_states(gridxfer_home):
    conn = journal.connect(journal.journal_path("fresh"), create=True)
    assert migrate.has_tape(conn)
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE name='files'").fetchone()[0]
    assert migrate.STATES in sql


def test_the_tape_figures_are_read_from_indexes_not_a_scan(gridxfer_home):
    path = journal.journal_path("idx")
    path.parent.mkdir(parents=True, exist_ok=True)
    _old_journal(path)
    conn = journal.connect(path)                       # an older journal gets them too
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert {"files_on_tape", "files_to_tape"} <= names
    from gridxfer.campaign.report import tape
    for sql in (f"SELECT on_tape - copied FROM files WHERE {tape._ON_TAPE} "
                "ORDER BY on_tape - copied LIMIT 1 OFFSET 3",
                f"SELECT total(size) FROM files WHERE {tape._ON_TAPE} AND on_tape > 5"):
        plan = " ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, ("T1",)))
        assert "USING INDEX files_to_tape" in plan or "USING COVERING INDEX" in plan \
            or "USING INDEX files_on_tape" in plan, plan
        assert "SCAN files" not in plan, plan


def test_a_damaged_journal_is_refused_not_migrated(gridxfer_home):
    from gridxfer.errors import UsageError
    path = journal.journal_path("dmg")
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA page_size=1024")
    conn.execute("PRAGMA journal_mode=WAL")           # as every gridxfer journal
    conn.executescript(OLD_SCHEMA)
    conn.executemany("INSERT INTO files (name, src_url, size, tier) VALUES (?, ?, 1, 'T1')",
                     [(f"f{i}" * 20, f"root://h//f{i}" * 10) for i in range(400)])
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name='files_tally'"
                        ).fetchone()[0]
    conn.close()
    data = bytearray(path.read_bytes())
    page = 1024 * (root - 1)
    data[page + 8:page + 1024] = b"\xff" * (1024 - 8)      # an index page's cells, garbled
    path.write_bytes(bytes(data))
    before = path.read_bytes()
    with pytest.raises(UsageError) as err:
        journal.connect(path)
    assert "malformed" in str(err.value)
    del err
    gc.collect()                                            # the failed connection closed
    wal = path.with_name(path.name + "-wal")
    assert path.read_bytes() == before                      # not migrated, not written
    assert not wal.exists() or wal.stat().st_size == 0
