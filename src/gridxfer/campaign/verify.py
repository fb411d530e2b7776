"""`gridxfer campaign verify NAME`: every done file's destination checked against its
source, like ``rclone check``: present, the same size, the same adler32.

The source's adler32 is asked again (it may have changed since the copy); a source that
cannot be read is compared with the adler32 the journal recorded, and says so. Checks run
``checkers`` at a time (threads, each asking the registry's metadata mover).

``fix=True`` holds the campaign's lock (no runner may be running), deletes each
destination copy that differs (a bad copy, as the integrity path deletes one), and puts
the missing and different files back to pending (attempts reset), with a ``verified``
event in the journal: ``gridxfer campaign resume NAME`` copies them again.
"""
from __future__ import annotations

import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any
from collections.abc import Callable

from gridxfer.errors import ErrorClass, TransferError, UsageError
from gridxfer.redact import redact
from gridxfer.campaign.journal import store as journal
from gridxfer.campaign.journal.lock import CampaignLock
from gridxfer.campaign.engine.factories import default_ops_factory

# problems: the destination is "missing", or differs in "size" or "checksum"; "unchecked":
# the destination or the source could not be read (nothing is fixed for it)
DIFFERENT = ("missing", "size", "checksum")
BATCH = 1000        # done files read from the journal at a time


@dataclass(frozen=True)
class VerifyIssue:
    file_id: int
    name: str
    tier: str
    dst_url: str
    problem: str            # missing | size | checksum | unchecked
    detail: str


@dataclass(frozen=True)
class VerifyResult:
    name: str
    checked: int            # done files looked at
    matching: int
    issues: tuple[VerifyIssue, ...] = ()
    requeued: int = 0       # --fix: files put back to pending
    removed: int = 0        # --fix: differing destination copies deleted

    def count(self, problem: str) -> int:
        return sum(1 for i in self.issues if i.problem == problem)

    @property
    def different(self) -> int:
        return sum(1 for i in self.issues if i.problem in DIFFERENT)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update({p: self.count(p) for p in (*DIFFERENT, "unchecked")})
        return d


def verify_campaign(name: str, *, fix: bool = False, checkers: int = 4,
                    tier: str | None = None,
                    ops_factory: Callable[[str], Any] | None = None) -> VerifyResult:
    path = journal.journal_path(name)
    if not path.exists():
        raise UsageError(f"no such campaign journal: {path}")
    if checkers < 1:
        raise UsageError(f"--checkers {checkers}: at least 1")
    ops_for = ops_factory or default_ops_factory
    lock = CampaignLock(name).acquire() if fix else None
    try:
        conn = journal.connect(path, readonly=not fix)
        try:
            from gridxfer.campaign.reload import journal_spec
            from gridxfer.campaign.runner import prepare_environment
            prepare_environment(journal_spec(path, journal.get_meta(conn)))
            cursor = conn.execute(
                "SELECT id, name, tier, src_url, dst_url, size, checksum FROM files "
                "WHERE state = 'done'" + (" AND tier = ?" if tier else "") + " ORDER BY id",
                (tier,) if tier else ())
            found: list[VerifyIssue] = []
            checked = 0
            with ThreadPoolExecutor(max_workers=checkers,
                                    thread_name_prefix="gridxfer-verify") as pool:
                while rows := cursor.fetchmany(BATCH):      # memory bounded by the batch
                    checked += len(rows)
                    found += [i for i in pool.map(lambda r: _check(r, ops_for), rows) if i]
            requeued = removed = 0
            if fix:
                removed = _remove_bad_copies(found, ops_for)
                requeued = _requeue(conn, found, checked=checked, removed=removed)
        finally:
            conn.close()
    finally:
        if lock is not None:
            lock.release()
    return VerifyResult(name, checked, checked - len(found), tuple(found), requeued, removed)


def _check(row: sqlite3.Row, ops_for: Callable[[str], Any]) -> VerifyIssue | None:
    def issue(problem: str, detail: str) -> VerifyIssue:
        return VerifyIssue(row["id"], row["name"], row["tier"], redact(row["dst_url"] or ""),
                           problem, redact(detail))

    dst = row["dst_url"]
    if not dst:
        return issue("unchecked", "the journal records no destination URL")
    try:
        dst_ops = ops_for(dst)
        size = dst_ops.stat(dst).size
    except TransferError as exc:
        if exc.error_class is ErrorClass.SOURCE_MISSING:    # stat's class for ENOENT
            return issue("missing", "not at the destination")
        return issue("unchecked", f"destination: {exc}")
    ref_size, ref_sum, against = row["size"], row["checksum"], "the journal"
    try:
        src_ops = ops_for(row["src_url"])
        ref_size = src_ops.stat(row["src_url"]).size
        ref_sum, against = src_ops.checksum(row["src_url"], "adler32"), "the source"
    except TransferError as exc:
        if not ref_sum:
            return issue("unchecked", f"source: {exc}; the journal has no adler32")
        against = f"the journal (source unreadable: {exc.error_class.value})"
    if size != ref_size:
        return issue("size", f"size {size} != {ref_size} of {against}")
    if not ref_sum:
        return None
    try:
        got = dst_ops.checksum(dst, "adler32")
    except TransferError as exc:
        return issue("unchecked", f"destination checksum: {exc}")
    if got != ref_sum:
        return issue("checksum", f"adler32 {got} != {ref_sum} of {against}")
    return None


def _remove_bad_copies(found: list[VerifyIssue], ops_for: Callable[[str], Any]) -> int:
    removed = 0
    for i in found:
        if i.problem in ("size", "checksum"):
            ops_for(i.dst_url).unlink(i.dst_url)     # a failure here stops before requeueing
            removed += 1
    return removed


def _requeue(conn: sqlite3.Connection, found: list[VerifyIssue], *, checked: int,
             removed: int) -> int:
    ids = [(i.file_id,) for i in found if i.problem in DIFFERENT]
    now = time.time()
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany("UPDATE files SET state='pending', attempts=0, not_before=0, "
                         "checksum=NULL, error_class=NULL, error_msg=NULL, updated=" + repr(now)
                         + " WHERE id=? AND state='done'", ids)
        journal.add_event(conn, "verified", ts=now, checked=checked, requeued=len(ids),
                          removed=removed)
        if ids:
            journal.set_meta(conn, [("state", "partial"), ("updated", repr(now))])
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return len(ids)
