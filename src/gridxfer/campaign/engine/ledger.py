"""The scheduler's journal writes: one transaction per scheduler loop (the results it
collected and the transfers it dispatched), and one at the end of a run (batched, so a
no-op mover runs thousands of files per second); and the counts a run starts from.
Row tuples are built by the scheduler in the column order of the statements below."""
from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from itertools import chain
from dataclasses import dataclass, field

from gridxfer.redact import may_hold_one, redact
from gridxfer.campaign.accounting.stats import Accounting
from gridxfer.campaign.journal import store as journal


@dataclass
class Batch:
    """Journal rows gathered during one scheduler loop, written as ONE transaction.

    Results may wait for the next dispatch (a crash before the commit leaves their
    attempts 'active', which recovery settles by checking the destination); a dispatch
    never waits: its attempt rows are committed before the transfers start."""
    file_updates: list = field(default_factory=list)   # (endpoint, dst_url, updated, id)
    # (id, file_id, tier, endpoint, dst_url, started, streams, tmp_url)
    attempts: list = field(default_factory=list)
    events: list = field(default_factory=list)         # (kind, detail)
    att_rows: list = field(default_factory=list)       # finished attempts
    done_rows: list = field(default_factory=list)
    pend_rows: list = field(default_factory=list)
    fail_rows: list = field(default_factory=list)
    cancel_rows: list = field(default_factory=list)
    skip_rows: list = field(default_factory=list)      # charged without a transfer (pooldown.py)
    # tape (tapeflow.py): copied to an archive tier (checksum, copied, updated, id); the
    # storage said on tape (on_tape, updated, id); a staged source online (staged, updated, id)
    archive_rows: list = field(default_factory=list)
    tape_rows: list = field(default_factory=list)
    online_rows: list = field(default_factory=list)

    def __bool__(self) -> bool:
        return any((self.file_updates, self.events, self.att_rows, self.done_rows,
                    self.pend_rows, self.fail_rows, self.cancel_rows, self.skip_rows,
                    self.archive_rows, self.tape_rows, self.online_rows))


# A file's message written while its pool is down (a charge, or the tier's files failed
# at the deadline: pooldown.py) in place of its own: the row's message (the one parameter)
# followed by the last attempt's class and text, as "; last attempt: ...", or, after a
# charge, by the tail that charge kept. A file in flight while its pool went down returns
# to a message that would otherwise say only "down" (CI, session 39: a davs PUT or MOVE
# unanswered for 120 s, reported without the request that hung).
LAST_ATTEMPT = "; last attempt: "
KEEP_LAST = ("? || CASE WHEN coalesce(error_msg, '') = '' THEN '' "
             "WHEN error_msg NOT LIKE 'not tried: %' THEN "
             f"'{LAST_ATTEMPT}' || coalesce(error_class || ': ', '') || error_msg "
             f"WHEN instr(error_msg, '{LAST_ATTEMPT}') > 0 THEN "
             f"substr(error_msg, instr(error_msg, '{LAST_ATTEMPT}')) ELSE '' END")

# (Batch field, statement), in the order they run: results first, then dispatches (a
# file retried at once goes pending, then active again, in the same transaction).
_STATEMENTS = (
    ("att_rows", "UPDATE attempts SET status=?, ended=?, bytes=?, rate=?, "
                 "streams=coalesce(?, streams), mode=?, error_class=?, error_msg=?, tmp_url=? "
                 "WHERE id=?"),
    ("done_rows", "UPDATE files SET state='done', checksum=?, error_class=NULL, "
                  "error_msg=NULL, updated=? WHERE id=?"),
    ("archive_rows", "UPDATE files SET state='archiving', checksum=?, copied=?, "
                     "error_class=NULL, error_msg=NULL, updated=? WHERE id=?"),
    ("tape_rows", "UPDATE files SET state='done', on_tape=?, updated=? "
                  "WHERE id=? AND state='archiving'"),
    ("online_rows", "UPDATE files SET state='pending', staged=?, updated=? "
                    "WHERE id=? AND state='staging'"),
    ("pend_rows", "UPDATE files SET state='pending', error_class=?, error_msg=?, "
                  "not_before=?, updated=? WHERE id=?"),
    ("fail_rows", "UPDATE files SET state='failed', error_class=?, error_msg=?, "
                  "updated=? WHERE id=?"),
    ("cancel_rows", "UPDATE files SET state='pending', attempts=max(0, attempts-1), "
                    "updated=? WHERE id=?"),
    ("skip_rows", "UPDATE files SET state=?, attempts=attempts+1, error_class=?, "
                  f"error_msg={KEEP_LAST}, not_before=?, updated=? WHERE id=?"),
    ("file_updates", "UPDATE files SET state='active', endpoint=?, dst_url=?, "
                     "attempts=attempts+1, updated=? WHERE id=?"),
    ("attempts", "INSERT INTO attempts (id, file_id, tier, endpoint, dst_url, started, streams, "
                 "tmp_url) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"),
)


def record(c: sqlite3.Connection, b: Batch, now: float) -> None:
    """Finished attempts and the files' new states (done, pending for a retry, failed,
    pending again after a cancel that does not count as an attempt), then files going
    active with their attempt rows, then events: one transaction."""
    c.execute("BEGIN IMMEDIATE")
    try:
        for name, sql in _STATEMENTS:
            rows = getattr(b, name)
            if rows:
                c.executemany(sql, _clean(rows))
        for kind, detail in b.events:
            journal.add_event(c, kind, ts=now, **detail)
        c.execute("COMMIT")
    except BaseException:
        if c.in_transaction:      # SQLite already rolled back after SQLITE_FULL / IOERR
            c.execute("ROLLBACK")
        raise


def _clean(rows: list[tuple]) -> list[tuple]:
    """The rows with every text redacted (error messages echo URLs, and URLs may carry
    credentials: ``gridxfer.redact``). All their texts are pre-checked as one: a loop's
    rows seldom hold a text that could carry a credential, and redacting each value of
    each row cost the dispatcher ~12 us a file (5,000 x 4 KB on loopback)."""
    # filter(str.__instancecheck__, ...): isinstance(v, str) in C, 2.3x the list's speed
    if not may_hold_one("\n".join(filter(str.__instancecheck__, chain.from_iterable(rows)))):
        return rows
    return [tuple(redact(v) if isinstance(v, str) else v for v in r) for r in rows]


def record_end(c: sqlite3.Connection, state: str, kind: str, now: float, **detail) -> None:
    """The run's closing event and the campaign state in ``meta``."""
    c.execute("BEGIN IMMEDIATE")
    journal.add_event(c, kind, ts=now, **detail)
    journal.set_meta(c, [("state", state), ("updated", repr(now))])
    c.execute("COMMIT")


def load_counts(c: sqlite3.Connection, acct: Accounting, tiers: Iterable[str]) -> None:
    """The journal's files per tier and state, loaded into ``acct`` as a run starts (a
    resumed campaign's progress counts what earlier runs did)."""
    counts = journal.tally(c)
    for tier in tiers:
        by = counts.get(tier, {})

        def get(state: str, by: dict = by) -> tuple[int, int]:
            return by.get(state, (0, 0))
        acct.load(tier, files_total=sum(n for n, _ in by.values()),
                  bytes_total=sum(b for _, b in by.values()),
                  done=get("done")[0], failed=get("failed")[0], bytes_done=get("done")[1],
                  bytes_failed=get("failed")[1], archiving=get("archiving")[0],
                  bytes_archiving=get("archiving")[1],
                  queued=get("pending")[0] + get("active")[0] + get("staging")[0])
