"""What ``run``, ``resume`` and ``run --dry-run`` return (frozen values the CLI renders:
the summary, ``--json``), and how a local run's result is read from its scheduler and
its journal."""
from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gridxfer.campaign import dryrun
from gridxfer.campaign.journal import store as journal
from gridxfer.campaign.engine.jobs import SchedulerResult


@dataclass(frozen=True)
class FileFailure:
    name: str
    tier: str
    src_url: str
    dst_url: str | None
    error_class: str | None
    error_msg: str | None
    attempts: int


@dataclass(frozen=True)
class CampaignResult:
    name: str
    journal: str
    state: str                  # done | partial | interrupted | planned (dry run)
    files_total: int
    files_done: int
    files_failed: int
    bytes_total: int
    bytes_done: int
    seconds: float
    mean_rate: float            # bytes/s of this run
    recovered: int = 0          # attempts recovered after a crash (resume)
    failures: tuple[FileFailure, ...] = ()
    dry_run: bool = False
    cleaned: int | None = None  # resume: temporary/partial files of earlier runs removed
    cancelled: int = 0          # files `campaign cancel` took out (failed, class cancelled)
    paused: str = ""            # interrupted: why its tiers waited for a token (no token in it)
    edited: dict[str, Any] | None = None    # resume: the campaign file's edits (reload.py)
    reloaded: bool = False      # resume --reload applied them
    plan: dryrun.Plan | None = None     # --dry-run: pairs, tiers, endpoint probes

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def failures(conn: sqlite3.Connection) -> tuple[FileFailure, ...]:
    """The failed files (the first 1,000 by id: the summary prints a few, JSON all of these)."""
    return tuple(FileFailure(r["name"], r["tier"], r["src_url"], r["dst_url"],
                             r["error_class"], r["error_msg"], r["attempts"])
                 for r in conn.execute(
                     "SELECT name, tier, src_url, dst_url, error_class, error_msg, attempts "
                     "FROM files WHERE state = 'failed' ORDER BY id LIMIT 1000"))


def from_scheduler(conn: sqlite3.Connection, path: Path, name: str, res: SchedulerResult,
                   recovered: int, cleaned: int | None = None) -> CampaignResult:
    """A local run's result: its scheduler's counts, the journal's failures."""
    snap = res.snapshot
    return CampaignResult(name, str(path), res.state, snap.files_total, snap.files_done,
                          snap.files_failed, snap.bytes_total, snap.bytes_done,
                          round(res.seconds, 3), snap.mean_rate, recovered, failures(conn),
                          cleaned=cleaned, cancelled=journal.count_cancelled(conn))
