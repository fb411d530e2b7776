"""`gridxfer campaign cancel NAME`, through the campaign's lock (lock.py).

* A runner holds the lock: it gets SIGTERM (the pid read from the lock file, after
  checking that this process really has the lock file open), and stops as after a Ctrl-C:
  transfers cancelled, temporary files removed, exit 4, resumable. ``cancel`` waits up to
  ``wait`` seconds for the lock to come free.
* No runner: ``cancel`` takes the lock, settles what an earlier run left (recovery.sweep:
  temporary and partial files removed), and marks every pending (or staging) file cancelled
  (``state='failed'``, ``error_class='cancelled'``: journal.py). ``resume`` leaves them
  alone and says so; ``resume --retry-cancelled`` (or ``--retry-failed``) brings them back.
"""
from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import asdict, dataclass
from typing import Any
from collections.abc import Callable

from gridxfer.errors import GridxferError, UsageError
from gridxfer.campaign.journal import store as journal
from gridxfer.campaign.journal.store import CANCELLED
from gridxfer.campaign.journal.lock import CampaignBusy, CampaignLock, holder
from gridxfer.campaign.engine.recovery import Swept, sweep

CANCEL_MSG = "cancelled by `gridxfer campaign cancel`"


@dataclass(frozen=True)
class CancelResult:
    name: str
    stopped_pid: int | None     # the runner that was signalled and has stopped
    cancelled: int              # pending files marked cancelled (no runner)
    recovered: int = 0          # attempts an earlier run left active, settled
    removed: int = 0            # temporary or partial files removed
    fts3_unknown: int = 0       # FTS3 jobs the server had no record of (files cancelled here)
    fts3_files: int = 0         # of ``cancelled``: files that were FTS3's (active in jobs)
    fts3_jobs: int = 0          # FTS3 jobs cancelled on the server

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def cancel_campaign(name: str, *, wait: float = 60.0, mover_factory: Callable | None = None,
                    ops_factory: Callable | None = None) -> CancelResult:
    path = journal.journal_path(name)
    if not path.exists():
        raise UsageError(f"no such campaign journal: {path}")
    lock = CampaignLock(name)
    stopped: CancelResult | None = None
    try:
        lock.acquire()
    except CampaignBusy as busy:
        stopped = _stop_runner(name, busy.pid, wait)
        if not _fts3(path):
            return stopped
        lock.acquire()          # the runner stopped polling: now cancel its FTS3 jobs
    try:
        conn = journal.connect(path)
        by_fts3 = unknown = jobs = 0
        try:
            # runner imports us
            from gridxfer.campaign.reload import journal_spec
            from gridxfer.campaign.runner import prepare_environment
            spec = journal_spec(path, journal.get_meta(conn))
            prepare_environment(spec)
            if spec.engine.kind == "fts3":       # its active attempts are jobs on the server
                swept = Swept(0, 0)
                before = journal.count_cancelled(conn)
                from gridxfer.campaign.fts3 import run as fts3_run    # FTS3's only
                out = fts3_run.cancel(conn, spec)
                by_fts3, unknown = journal.count_cancelled(conn) - before, out.unknown
                jobs = out.jobs
                journal.add_event(conn, "fts3_cancelled", jobs=out.jobs, files=by_fts3,
                                  unknown=unknown)
            else:
                swept = sweep(conn, spec, mover_factory, ops_factory)
            now = time.time()
            conn.execute("BEGIN IMMEDIATE")
            try:
                n = conn.execute("UPDATE files SET state='failed', error_class=?, error_msg=?, "
                                 "updated=? WHERE state IN ('pending', 'staging')",
                                 (CANCELLED, CANCEL_MSG, now)).rowcount
                journal.add_event(conn, "cancelled", ts=now, files=n, pid=None)
                if n:                   # a finished campaign stays done (or partial)
                    journal.set_meta(conn, [("state", "cancelled"), ("updated", repr(now))])
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        finally:
            conn.close()
    finally:
        lock.release()
    return CancelResult(name, stopped.stopped_pid if stopped else None, n + by_fts3,
                        swept.recovered, swept.removed, unknown, by_fts3, jobs)


def _fts3(path: Any) -> bool:
    conn = journal.connect(path, readonly=True)
    try:
        spec = json.loads(journal.get_meta(conn).get("spec") or "{}")
        return isinstance(spec, dict) and (spec.get("engine") or {}).get("kind") == "fts3"
    finally:
        conn.close()


def _stop_runner(name: str, pid: int | None, wait: float) -> CancelResult:
    if pid is None or holder(name) != pid:
        raise GridxferError(f"campaign {name!r} is locked, but the lock file names no live "
                            f"holder; nothing was signalled")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return CancelResult(name, pid, 0)           # it ended meanwhile
    except PermissionError:
        raise GridxferError(f"campaign {name!r} runs as pid {pid}, which this user may not "
                            f"signal") from None
    deadline = time.monotonic() + wait
    while holder(name) == pid:
        if time.monotonic() > deadline:
            raise GridxferError(f"campaign {name!r}: pid {pid} got SIGTERM but still runs "
                                f"after {wait:g} s")
        time.sleep(0.05)
    return CancelResult(name, pid, 0)
