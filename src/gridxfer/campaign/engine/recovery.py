"""What an earlier run left behind, settled before a resume (and by ``campaign cancel``):

* attempts left 'active' (the process was killed, or stopped while a transfer was still
  in its mover): their temporary files removed, a verified final file kept as done
  (as archiving on a tape-backed tier: on tape only once the storage says so),
  anything else (a partial or POSC-pending final file included) deleted and redone;
* ended attempts whose journalled temporary name may still exist (``journal.leftover_temps``:
  the mover's own clean-up failed, or a transfer was abandoned): removed.

Every temporary name is journalled before the transfer starts (scheduler), so this finds
all of them; for attempts left active the destination directory is listed as well, once
per directory, for ``.<name>.gxpart-*`` names of those files (older journals, other movers).
An endpoint that does not answer keeps its temporary names for the next resume.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import normalise_adler32
from gridxfer.movers.capabilities import capabilities_of
from gridxfer.movers.urls import server_of
from gridxfer.campaign.journal import store as journal
from gridxfer.campaign.engine.factories import ops_factory_for
from gridxfer.campaign.spec.schema import CampaignSpec

_DOWN = (ErrorClass.CONNECTION, ErrorClass.TIMEOUT)


@dataclass(frozen=True)
class Swept:
    recovered: int      # attempts left active (and orphan active files), settled
    removed: int        # temporary or partial files deleted at the destinations
    kept: int = 0       # temporary names an unreachable endpoint kept: the next resume


def sweep(conn, spec: CampaignSpec, mover_factory: Callable | None = None,
          ops_factory: Callable | None = None) -> Swept:
    ops_for = ops_factory_for(mover_factory, ops_factory)
    cleaner = _Cleaner(ops_for)
    recovered = _recover(conn, spec, ops_for, cleaner)
    _leftovers(conn, cleaner)
    return Swept(recovered, cleaner.removed, cleaner.kept)


def recover(conn, spec: CampaignSpec, mover_factory: Callable | None = None,
            ops_factory: Callable | None = None) -> int:
    """``sweep``, returning the number of attempts recovered."""
    return sweep(conn, spec, mover_factory, ops_factory).recovered


class _Cleaner:
    """Removes destination files, counting them; stops asking an endpoint that is down."""

    def __init__(self, ops_for: Callable[[str], Any]) -> None:
        self.ops_for, self.removed, self.kept = ops_for, 0, 0
        self.down: set[str] = set()

    def ops(self, url: str) -> Any:
        try:
            return self.ops_for(url)
        except Exception:
            return None

    def remove(self, url: str, *, known: bool = False) -> bool:
        """Make sure ``url`` is gone; False if it may still be there. ``known``: it was
        just listed (no stat first)."""
        key = server_of(url)
        ops = self.ops(url)
        if ops is None or key in self.down:
            self.kept += 1
            return False
        caps = capabilities_of(ops)
        stat = caps.stat
        if not known and stat is not None:
            try:
                stat(url)
            except TransferError as exc:
                if exc.error_class is ErrorClass.SOURCE_MISSING:
                    return True                 # never created, or already removed
                return self._failed(key, exc)
            except Exception as exc:  # noqa: BLE001 - a mover bug must not stop a resume
                return self._failed(key, exc)
        unlink = caps.unlink
        if unlink is None:
            self.kept += 1
            return False
        try:
            unlink(url)
        except Exception as exc:  # noqa: BLE001
            return self._failed(key, exc)
        self.removed += 1
        return True

    def _failed(self, key: str, exc: BaseException) -> bool:
        if isinstance(exc, TransferError) and exc.error_class in _DOWN:
            self.down.add(key)
        self.kept += 1
        return False


def _leftovers(conn, cleaner: _Cleaner) -> None:
    gone = [(r["id"],) for r in journal.leftover_temps(conn) if cleaner.remove(r["tmp_url"])]
    if gone:
        conn.executemany("UPDATE attempts SET tmp_url=NULL WHERE id=?", gone)


def _recover(conn, spec: CampaignSpec, ops_for: Callable, cleaner: _Cleaner) -> int:
    rows = journal.active_attempts(conn)
    orphans = journal.orphan_active_files(conn)
    if not rows and not orphans:
        return 0
    now = time.time()
    att, done, archiving, pending, events = [], [], [], [], []
    tape_tiers = {t.name for t in spec.destinations if t.archive_timeout is not None}
    listings: dict[str, list[str]] = {}
    for r in rows:
        mover, src_ops = cleaner.ops(r["dst_url"]), cleaner.ops(r["src_url"])
        if mover is None or src_ops is None:    # the file is simply redone
            verdict, checksum, tmp_left = "redo", None, r["tmp_url"]
        else:
            tmp_left = _remove_temps(cleaner, mover, r, listings)
            verdict, checksum = _check_destination(cleaner, mover, src_ops, r, spec)
        att.append((now, f"process died; recovered: {verdict}", tmp_left, r["id"]))
        if verdict == "done" and r["tier"] in tape_tiers:    # copied: not on tape yet
            archiving.append((checksum, now, now, r["file_id"]))
        elif verdict == "done":
            done.append((checksum, now, r["file_id"]))
        else:
            pending.append((now, r["file_id"]))
        events.append(dict(file_id=r["file_id"], attempt_id=r["id"], outcome=verdict))
    pending += [(now, o["id"]) for o in orphans]
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany("UPDATE attempts SET status='cancelled', ended=?, error_class='cancelled',"
                         " error_msg=?, tmp_url=? WHERE id=?", att)
        conn.executemany("UPDATE files SET state='done', checksum=?, updated=? WHERE id=?", done)
        conn.executemany("UPDATE files SET state='archiving', checksum=?, copied=?, updated=? "
                         "WHERE id=?", archiving)
        conn.executemany("UPDATE files SET state='pending', attempts=max(0, attempts-1), "
                         "not_before=0, updated=? WHERE id=? AND state='active'", pending)
        for e in events:
            journal.add_event(conn, "recovered", ts=now, **e)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:      # SQLite already rolled back after SQLITE_FULL / IOERR
            conn.execute("ROLLBACK")
        raise
    return len(rows) + len(orphans)


def _remove_temps(cleaner: _Cleaner, mover: Any, r: Any,
                  listings: dict[str, list[str]]) -> str | None:
    """Remove the attempt's journalled temporary name and any other temporary name of its
    file in the directory; the journalled name if it may still exist, else None."""
    tmp = r["tmp_url"]
    listed = _temp_names(mover, r["dst_url"], listings)
    left = tmp if tmp and not cleaner.remove(tmp, known=tmp in listed) else None
    for name in listed:
        if name != tmp:
            cleaner.remove(name, known=True)
    return left


def _check_destination(cleaner: _Cleaner, mover: Any, src_ops: Any, r: Any,
                       spec: CampaignSpec) -> tuple[str, str | None]:
    caps = capabilities_of(mover)
    if caps.stat is None:
        return "redo", None
    try:
        entry = caps.stat(r["dst_url"])
    except TransferError:
        return "redo", None
    # A POSC file still open by the dead process is incomplete whatever its size says.
    if int(entry.size) == int(r["size"]) and not entry.pending:
        if not spec.checksum.algorithm:
            return "done", None
        src_sum = capabilities_of(src_ops).checksum
        have: str | None = None
        want: str | None = None
        try:
            if caps.checksum is not None:
                have = normalise_adler32(caps.checksum(r["dst_url"], "adler32"))
                want = r["expected_checksum"]
                if not want and src_sum is not None:
                    want = normalise_adler32(src_sum(r["src_url"], "adler32"))
        except TransferError:
            have = want = None
        if have and have == want:
            return "done", have
    cleaner.remove(r["dst_url"], known=True)
    return "redo", None


def _temp_names(mover: Any, dst: str, listings: dict[str, list[str]]) -> list[str]:
    """Temporary names of ``dst`` left in its directory (movers.urls naming); each
    directory is listed once per recovery (``listings``: parent URL -> entry names)."""
    from gridxfer.movers.urls import TEMP_MARK, temp_stem
    parent, _, name = dst.rstrip("/").rpartition("/")
    if parent not in listings:
        listdir = capabilities_of(mover).listdir
        try:
            listings[parent] = [] if listdir is None else [
                e.url.rstrip("/").rpartition("/")[2] for e in listdir(parent + "/")]
        except Exception:
            listings[parent] = []
    prefix = f".{temp_stem(name)}{TEMP_MARK}"
    return [parent + "/" + n for n in listings[parent] if n.startswith(prefix)]
