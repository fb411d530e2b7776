"""The read side of campaigns: status from the journal's indexed counts (< 1 s on 1 M
files), the list of campaigns, and whether a live process runs it (holds its lock)."""
from __future__ import annotations

import contextlib
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gridxfer.errors import GridxferError
from gridxfer.campaign.journal import store as journal
from gridxfer.campaign.journal import check as journalcheck
from gridxfer.campaign.journal.lock import holder_at as lock_holder_at
from gridxfer.campaign.journal.names import name_of, read as read_names
from gridxfer.campaign.report.filters import NO_FILTERS, Filters, scope
from gridxfer.campaign.report.tape import TapeReport, tape_report


@dataclass(frozen=True)
class CampaignStatus:
    name: str
    journal: str
    state: str
    files: dict[str, int]                   # state -> files (all tiers)
    bytes: dict[str, int]                   # state -> bytes
    tiers: dict[str, dict[str, int]]        # tier -> state -> files
    created: float | None = None
    updated: float | None = None
    links: tuple[dict, ...] = field(default=())
    excluded: tuple[dict, ...] = field(default=())      # endpoints out of rotation (--links)
    error: str | None = None                # state "unreadable": why (campaign list)
    tape: TapeReport | None = None          # tape tiers and staging (report/tape.py)
    cancelled: int = 0                      # of the failed: taken out by `campaign cancel`
    failed_files: tuple[dict, ...] = field(default=())  # the first FAILED_SHOWN failed files
    names: dict[str, str] = field(default_factory=dict)  # endpoint URL -> name
    filters: Filters = NO_FILTERS            # what the counts were narrowed to
    started: float | None = None            # the first attempt's start
    ended: float | None = None              # the last attempt's end
    paused: tuple[dict, ...] = ()           # tiers waiting for a token: {tier, reason}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _alive(pid: str | None) -> bool:
    if not pid or not (pid.isascii() and pid.isdigit()) or len(pid) > 9 \
            or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        return b"gridxfer" in cmd or b"pytest" in cmd
    return True


def _running(path: Path, pid: str | None) -> bool:
    """A live process holds the campaign's lock (lock.py); a journal without a lock file
    (written by an older gridxfer) falls back to its pid."""
    lock_file = path.with_suffix(".lock")
    if lock_file.exists():
        return lock_holder_at(lock_file) is not None
    return _alive(pid)


FAILED_SHOWN = 100


UNPLANNED = ("stopped while planning, nothing was planned; `gridxfer campaign run FILE` "
             "starts it again")


def campaign_status(name: str, *, links: bool = False,
                    filters: Filters = NO_FILTERS) -> CampaignStatus:
    return _status(journal.journal_path(name), links=links, filters=filters)


def _status(path: Path, *, links: bool = False, filters: Filters = NO_FILTERS) -> CampaignStatus:
    conn = journal.connect(path, readonly=True)
    try:
        with journalcheck.reading(path):
            names = read_names(conn)
            scope(conn, filters)
            return _read_status(conn, path, links, names, filters)
    finally:
        conn.close()


def _read_status(conn, path: Path, links: bool, names: dict[str, str],
                 filters: Filters) -> CampaignStatus:
    meta = journal.get_meta(conn)
    counts = journal.tally(conn, indexed=not filters)
    files: dict[str, int] = {}
    nbytes: dict[str, int] = {}
    tiers: dict[str, dict[str, int]] = {}
    for tier, by in counts.items():
        for st, (n, b) in by.items():
            files[st] = files.get(st, 0) + n
            nbytes[st] = nbytes.get(st, 0) + b
            tiers.setdefault(tier, {})[st] = n
    state = "".join(c if c.isprintable() else "?" for c in meta.get("state", "?"))[:20]
    if state == "running" and not _running(path, meta.get("pid")):
        state = "interrupted"          # killed: resume recovers it
    if not meta and not counts:        # the plan's one transaction never committed
        return CampaignStatus(path.stem, str(path), "unplanned", {}, {}, {}, error=UNPLANNED)
    link_rows: tuple[dict, ...] = ()
    excluded: tuple[dict, ...] = ()
    if links:
        from gridxfer.campaign.policy.exclusion_log import current_exclusions
        from gridxfer.campaign.policy.optimizer_log import link_status
        link_rows = tuple(asdict(s) for s in link_status(conn))
        excluded = tuple({**asdict(e), "endpoint": name_of(names, e.url)}
                         for e in current_exclusions(conn))
    failed = tuple(dict(r) for r in conn.execute(
        "SELECT name, tier, endpoint, error_class, error_msg, attempts, updated FROM files "
        "WHERE state = 'failed' LIMIT ?", (FAILED_SHOWN,)))   # index order: no sort
    return CampaignStatus(meta.get("name", path.stem), str(path), state, files, nbytes, tiers,
                          _float(meta.get("created")), _float(meta.get("updated")), link_rows,
                          excluded, tape=tape_report(conn, time.time()),
                          cancelled=journal.count_cancelled(conn), failed_files=failed,
                          names=names, filters=filters, started=_first(conn),
                          ended=conn.execute("SELECT max(ended) FROM attempts").fetchone()[0],
                          paused=paused_tiers(conn))


def paused_tiers(conn) -> tuple[dict, ...]:
    """The tiers the last run left waiting for a token (``tier_paused`` without a later
    ``tier_resumed``, since its ``started`` event): {tier, reason}."""
    start = conn.execute("SELECT max(id) FROM events WHERE kind = 'started'").fetchone()[0]
    out: dict[str, dict] = {}
    for kind, detail in conn.execute(
            "SELECT kind, detail FROM events WHERE kind IN ('tier_paused', 'tier_resumed') "
            "AND id > ? ORDER BY id", (start or 0,)):
        try:
            d = json.loads(detail)
        except ValueError:
            continue
        tier = str(d.get("tier", "?"))
        if kind == "tier_paused":
            out[tier] = {"tier": tier, "reason": str(d.get("reason", ""))}
        else:
            out.pop(tier, None)
    return tuple(out.values())


def _first(conn) -> float | None:
    row = conn.execute("SELECT started FROM attempts ORDER BY id LIMIT 1").fetchone()
    return row[0] if row else None


def list_campaigns() -> list[CampaignStatus]:
    """Every journal; one that cannot be read is listed as "unreadable" with the reason."""
    out = []
    for path in journal.list_journals():
        try:
            out.append(_status(path))
        except GridxferError as exc:
            reason = str(exc).removeprefix(f"{path}: ")
            out.append(CampaignStatus(path.stem, str(path), "unreadable", {}, {}, {},
                                      error=reason))
    return out


def _float(text: str | None) -> float | None:
    try:
        value = float(text) if text else None
    except (TypeError, ValueError):
        return None
    return value if value is None or math.isfinite(value) else None
