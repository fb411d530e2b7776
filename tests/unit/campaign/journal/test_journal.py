"""Journal: planning in one transaction, indexed queries, mode 0600, WAL."""
from __future__ import annotations

import os
import stat
import time


from gridxfer.campaign.journal import planning, store as journal


def _plan(n=100, tiers=("T1", "T2")):
    path = journal.journal_path("j1")
    conn = journal.connect(path, create=True)
    rows = ((f"f{i}", f"root://h//d/f{i}", i, t, None) for i in range(n) for t in tiers)
    count = planning.plan(conn, {"name": "j1", "state": "planned"}, rows, chunk=37)
    return path, conn, count


def test_plan_and_tally(gridxfer_home):
    path, conn, count = _plan()
    assert count == 200
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert path.parent == gridxfer_home / "campaigns"
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert journal.tally(conn) == {"T1": {"pending": (100, sum(range(100)))},
                                   "T2": {"pending": (100, sum(range(100)))}}
    assert journal.get_meta(conn)["state"] == "planned"
    assert [e["files"] for e in journal.last_events(conn, "planned")] == [200]


def test_plan_is_idempotent_per_src_and_tier(gridxfer_home):
    _, conn, _ = _plan(10)
    planning.plan(conn, {}, [("f1", "root://h//d/f1", 1, "T1", None)])
    assert sum(n for by in journal.tally(conn).values() for n, _ in by.values()) == 20


def test_fetch_pending_cursor(gridxfer_home):
    _, conn, _ = _plan(10)
    first = journal.fetch_pending(conn, "T1", 0, 4)
    assert [r["name"] for r in first] == ["f0", "f1", "f2", "f3"]
    nxt = journal.fetch_pending(conn, "T1", first[-1]["id"], 100)
    assert [r["name"] for r in nxt] == [f"f{i}" for i in range(4, 10)]


def test_active_attempts_and_orphans(gridxfer_home):
    _, conn, _ = _plan(3, tiers=("T1",))
    now = time.time()
    conn.execute("UPDATE files SET state='active' WHERE id IN (1, 2)")
    conn.execute("INSERT INTO attempts (id, file_id, tier, endpoint, dst_url, started) "
                 "VALUES (7, 1, 'T1', 'root://e//', 'root://e//f0', ?)", (now,))
    assert [(r["id"], r["file_id"], r["src_url"]) for r in journal.active_attempts(conn)] == [
        (7, 1, "root://h//d/f0")]
    assert [r["id"] for r in journal.orphan_active_files(conn)] == [2]
    assert journal.next_attempt_id(conn) == 8


def test_status_query_uses_covering_index(gridxfer_home):
    _, conn, _ = _plan(5)
    plan = " ".join(r[3] for r in conn.execute(
        "EXPLAIN QUERY PLAN SELECT tier, state, count(*), total(size) FROM files "
        "INDEXED BY files_tally GROUP BY tier, state"))
    assert "COVERING INDEX files_tally" in plan


def test_a_name_that_is_not_utf8_fails_alone_as_bad_name(tmp_path):
    """One undecodable name (a surrogate from os.listdir) fails as bad_name, stored with
    its bytes escaped; the other files are planned (it used to stop the whole plan)."""
    conn = journal.connect(tmp_path / "j.sqlite", create=True)
    rows = [("ok.dat", "file:///d/ok.dat", 1, "T1", None),
            ("bad\udcff.dat", "file:///d/bad\udcff.dat", 1, "T1", None)]
    assert planning.plan(conn, {"name": "x"}, rows) == 2
    got = dict(conn.execute("SELECT name, state || ' ' || ifnull(error_class, '') FROM files"))
    assert got == {"ok.dat": "pending ", "bad\\xff.dat": "failed bad_name"}
    msg = conn.execute("SELECT error_msg FROM files WHERE state = 'failed'").fetchone()[0]
    assert "not valid UTF-8" in msg


def test_plan_counts_inserted_rows_and_keeps_types(tmp_path):
    conn = journal.connect(tmp_path / "j.sqlite", create=True)
    rows = [("caf\u00e9.dat", "file:///d/caf\u00e9.dat", 5, "T1", "0000abcd"),
            ("b.dat", "file:///d/b.dat", 7, "T1", None),
            ("b.dat", "file:///d/b.dat", 7, "T1", None)]          # same source, same tier
    assert planning.plan(conn, {"name": "x"}, rows, chunk=2) == 2
    got = conn.execute("SELECT name, size, typeof(size), tier, expected_checksum, state "
                       "FROM files ORDER BY id").fetchall()
    assert [tuple(r) for r in got] == [("caf\u00e9.dat", 5, "integer", "T1", "0000abcd", "pending"),
                                       ("b.dat", 7, "integer", "T1", None, "pending")]


def test_older_journal_gets_the_temp_index_on_open(tmp_path):
    """A journal written before attempts_tmp existed opens read-write with it (idempotent
    CREATE INDEX IF NOT EXISTS) and keeps its rows; readers of old journals still work."""
    path = tmp_path / "old.sqlite"
    conn = journal.connect(path, create=True)
    conn.execute("DROP INDEX attempts_tmp")
    conn.execute(
        "INSERT INTO files (id, name, src_url, size, tier) VALUES (1, 'f', 'file:///f', 1, 'T')"
    )
    conn.execute("INSERT INTO attempts (id, file_id, tier, endpoint, dst_url, started, status, "
                 "tmp_url) VALUES (1, 1, 'T', 'file:///d/', 'file:///d/f', 0, 'failed', "
                 "'file:///d/.f.gxpart-1')")
    conn.close()
    ro = journal.connect(path, readonly=True)
    assert journal.tally(ro) == {"T": {"pending": (1, 1)}}
    ro.close()
    conn = journal.connect(path)
    assert [r["tmp_url"] for r in journal.leftover_temps(conn)] == ["file:///d/.f.gxpart-1"]
    assert journal.count_cancelled(conn) == 0
