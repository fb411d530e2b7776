"""Crash recovery: attempts a killed process left 'active' are settled before a resume
(temporary files removed, a verified final file kept as done, anything else redone)."""
from __future__ import annotations

import contextlib
import time
from typing import Any, Callable

from ..errors import TransferError
from ..movers.base import normalise_adler32
from . import journal
from .factories import ops_factory_for
from .spec import CampaignSpec


def recover(conn, spec: CampaignSpec, mover_factory: Callable | None = None,
            ops_factory: Callable | None = None) -> int:
    """Attempts left 'active' by a killed process: remove its temporary files, keep a
    verified final file (right size and adler32) as done, otherwise delete it and redo."""
    ops_for = ops_factory_for(mover_factory, ops_factory)
    rows = journal.active_attempts(conn)
    orphans = journal.orphan_active_files(conn)
    if not rows and not orphans:
        return 0
    now = time.time()
    att, done, pending, events = [], [], [], []
    listings: dict[str, list[str]] = {}
    for r in rows:
        try:
            mover, src_ops = ops_for(r["dst_url"]), ops_for(r["src_url"])
        except Exception:       # no mover: the file is simply redone (overwrite permitting)
            mover = src_ops = None
        verdict, checksum = (_check_destination(mover, src_ops, r, spec, listings) if mover
                             else ("redo", None))
        att.append((now, f"process died; recovered: {verdict}", r["id"]))
        if verdict == "done":
            done.append((checksum, now, r["file_id"]))
        else:
            pending.append((now, r["file_id"]))
        events.append(dict(file_id=r["file_id"], attempt_id=r["id"], outcome=verdict))
    pending += [(now, o["id"]) for o in orphans]
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany("UPDATE attempts SET status='cancelled', ended=?, error_class='cancelled',"
                         " error_msg=? WHERE id=?", att)
        conn.executemany("UPDATE files SET state='done', checksum=?, updated=? WHERE id=?", done)
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


def _check_destination(mover: Any, src_ops: Any, r: Any, spec: CampaignSpec,
                       listings: dict[str, list[str]]) -> tuple[str, str | None]:
    for tmp in filter(None, (r["tmp_url"], *_temp_names(mover, r["dst_url"], listings))):
        _quiet(getattr(mover, "unlink", None), tmp)
    stat = getattr(mover, "stat", None)
    if stat is None:
        return "redo", None
    try:
        entry = stat(r["dst_url"])
    except TransferError:
        return "redo", None
    # A POSC file still open by the dead process is incomplete whatever its size says.
    if int(entry.size) == int(r["size"]) and not getattr(entry, "pending", False):
        if not spec.checksum.algorithm:
            return "done", None
        try:
            have = normalise_adler32(mover.checksum(r["dst_url"], "adler32"))
            want = r["expected_checksum"] or normalise_adler32(
                src_ops.checksum(r["src_url"], "adler32"))
        except (TransferError, AttributeError):
            have = want = None
        if have and have == want:
            return "done", have
    _quiet(getattr(mover, "unlink", None), r["dst_url"])
    return "redo", None


def _temp_names(mover: Any, dst: str, listings: dict[str, list[str]]) -> list[str]:
    """Temporary names of ``dst`` left in its directory (movers.urls naming); each
    directory is listed once per recovery (``listings``: parent URL -> entry names)."""
    from ..movers.urls import TEMP_MARK
    parent, _, name = dst.rstrip("/").rpartition("/")
    if parent not in listings:
        try:
            listings[parent] = [e.url.rstrip("/").rpartition("/")[2]
                                for e in mover.listdir(parent + "/")]
        except Exception:
            listings[parent] = []
    prefix = f".{name}{TEMP_MARK}"
    return [parent + "/" + n for n in listings[parent] if n.startswith(prefix)]


def _quiet(fn: Callable | None, *args: Any) -> None:
    if fn is None:
        return
    with contextlib.suppress(Exception):
        fn(*args)
