"""Saved originals: ``$GRIDXFER_HOME/tuning/<host>.json`` (readable JSON, mode 0600).

The file is written *before* the first value changes, with ``status: "applying"``; only a
completed apply sets ``"applied"``. A file still saying ``"applying"`` therefore means a run
crashed half-way, and the originals in it are what ``rollback`` restores. The originals of a
key are recorded once (the first apply) so stacked applies roll back to the pristine host.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .. import state as gstate
from ..errors import GridxferError

APPLYING, APPLIED, RESTORED = "applying", "applied", "restored"


@dataclass(frozen=True)
class Original:
    key: str
    value: str


@dataclass(frozen=True)
class HostState:
    host: str
    status: str
    profile: str
    originals: tuple[Original, ...] = ()       # in apply order
    updated: float = field(default=0.0)

    def to_json(self) -> dict:
        return {"host": self.host, "status": self.status, "profile": self.profile,
                "updated": self.updated,
                "originals": [{"key": o.key, "value": o.value} for o in self.originals]}


def state_path(state_id: str) -> Path:
    return gstate.subdir("tuning") / f"{state_id}.json"


def load(state_id: str) -> HostState | None:
    path = state_path(state_id)
    if not path.exists():
        return None
    try:
        data = gstate.read_json(path)
        return HostState(host=data["host"], status=data["status"], profile=data["profile"],
                         updated=float(data.get("updated", 0)),
                         originals=tuple(Original(o["key"], o["value"])
                                         for o in data.get("originals", [])))
    except (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError) as exc:
        raise GridxferError(f"{path}: unreadable tuning state ({exc}); fix or remove it") from None


def save(state_id: str, st: HostState) -> HostState:
    st = HostState(st.host, st.status, st.profile, st.originals, time.time())
    gstate.write_json(state_path(state_id), st.to_json())
    return st


def merge_originals(old: HostState | None, current: dict[str, str]) -> tuple[Original, ...]:
    """Keep originals recorded earlier; add the current value of keys seen for the first time."""
    kept = list(old.originals) if old and old.status != RESTORED else []
    known = {o.key for o in kept}
    return tuple(kept + [Original(k, v) for k, v in current.items() if k not in known])


@contextlib.contextmanager
def host_lock(state_id: str, label: str) -> Iterator[None]:
    """One apply/rollback per host at a time (flock on ``<host>.lock`` beside the state)."""
    path = gstate.subdir("tuning") / f"{state_id}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise GridxferError(f"{label}: another gridxfer tune apply/rollback is running "
                                f"(lock {path})") from None
        yield
    finally:
        os.close(fd)
