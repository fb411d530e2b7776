"""The read side of campaigns: status from the journal's indexed counts (< 1 s on 1 M
files), the list of campaigns, and whether a journal's owning process still lives."""
from __future__ import annotations

import contextlib
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import journal


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _alive(pid: str | None) -> bool:
    if not pid or not pid.isdigit() or int(pid) == os.getpid():
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


def campaign_status(name: str, *, links: bool = False) -> CampaignStatus:
    return _status(journal.journal_path(name), links=links)


def _status(path: Path, *, links: bool = False) -> CampaignStatus:
    conn = journal.connect(path, readonly=True)
    try:
        meta = journal.get_meta(conn)
        counts = journal.tally(conn)
        files: dict[str, int] = {}
        nbytes: dict[str, int] = {}
        tiers: dict[str, dict[str, int]] = {}
        for tier, by in counts.items():
            for st, (n, b) in by.items():
                files[st] = files.get(st, 0) + n
                nbytes[st] = nbytes.get(st, 0) + b
                tiers.setdefault(tier, {})[st] = n
        state = meta.get("state", "?")
        if state == "running" and not _alive(meta.get("pid")):
            state = "interrupted"          # killed: resume recovers it
        link_rows: tuple[dict, ...] = ()
        excluded: tuple[dict, ...] = ()
        if links:
            from .exclusions import current_exclusions
            from .optimizer import link_status
            link_rows = tuple(asdict(s) for s in link_status(conn))
            excluded = tuple(asdict(e) for e in current_exclusions(conn))
        return CampaignStatus(meta.get("name", path.stem), str(path), state, files, nbytes, tiers,
                              _float(meta.get("created")), _float(meta.get("updated")), link_rows,
                              excluded)
    finally:
        conn.close()


def list_campaigns() -> list[CampaignStatus]:
    return [_status(p) for p in journal.list_journals()]


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None
