"""The scheduler's journal writes: each dispatch, each batch of results and the end of a
run is ONE transaction (batched, so a no-op mover runs thousands of files per second).
Row tuples are built by the scheduler in the column order of the statements below."""
from __future__ import annotations

import sqlite3

from . import journal


def record_dispatch(c: sqlite3.Connection, file_updates: list, attempts: list, events: list,
                    now: float) -> None:
    """Files going active (endpoint, dst_url, updated, id), their attempt rows
    (id, file_id, tier, endpoint, dst_url, started, streams) and events (kind, detail)."""
    c.execute("BEGIN IMMEDIATE")
    try:
        if file_updates:
            c.executemany("UPDATE files SET state='active', endpoint=?, dst_url=?, "
                          "attempts=attempts+1, updated=? WHERE id=?", file_updates)
            c.executemany("INSERT INTO attempts (id, file_id, tier, endpoint, dst_url, "
                          "started, streams) VALUES (?, ?, ?, ?, ?, ?, ?)", attempts)
        for kind, detail in events:
            journal.add_event(c, kind, ts=now, **detail)
        c.execute("COMMIT")
    except BaseException:
        c.execute("ROLLBACK")
        raise


def record_results(c: sqlite3.Connection, att_rows: list, done_rows: list, pend_rows: list,
                   fail_rows: list, cancel_rows: list) -> None:
    """Finished attempts and the files' new states (done, pending for a retry, failed,
    pending again after a cancel that does not count as an attempt)."""
    c.execute("BEGIN IMMEDIATE")
    try:
        c.executemany("UPDATE attempts SET status=?, ended=?, bytes=?, rate=?, "
                      "streams=coalesce(?, streams), mode=?, error_class=?, error_msg=? "
                      "WHERE id=?", att_rows)
        c.executemany("UPDATE files SET state='done', checksum=?, error_class=NULL, "
                      "error_msg=NULL, updated=? WHERE id=?", done_rows)
        c.executemany("UPDATE files SET state='pending', error_class=?, error_msg=?, "
                      "not_before=?, updated=? WHERE id=?", pend_rows)
        c.executemany("UPDATE files SET state='failed', error_class=?, error_msg=?, "
                      "updated=? WHERE id=?", fail_rows)
        c.executemany("UPDATE files SET state='pending', attempts=max(0, attempts-1), "
                      "updated=? WHERE id=?", cancel_rows)
        c.execute("COMMIT")
    except BaseException:
        c.execute("ROLLBACK")
        raise


def record_end(c: sqlite3.Connection, state: str, kind: str, now: float, **detail) -> None:
    """The run's closing event and the campaign state in ``meta``."""
    c.execute("BEGIN IMMEDIATE")
    journal.add_event(c, kind, ts=now, **detail)
    journal.set_meta(c, [("state", state), ("updated", repr(now))])
    c.execute("COMMIT")
