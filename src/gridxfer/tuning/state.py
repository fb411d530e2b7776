"""Saved originals: ``$GRIDXFER_HOME/tuning/<host>.json`` (readable JSON, mode 0600).

The file is written *before* the first value changes, with ``status: "applying"``; only a
completed apply sets ``"applied"``. A file still saying ``"applying"`` therefore means a run
crashed half-way, and the originals in it are what ``rollback`` restores. The originals of a
key are recorded once (the first apply) so stacked applies roll back to the pristine host.
``files`` are the sysctl.d files ``--persist`` wrote, each with what it held before (None: it
did not exist), recorded before the file is written; ``rollback`` removes or restores them.

Every write is atomic (``gridxfer.state.write_atomic``): a full disk leaves the previous state
intact and raises StateWriteError (exit 1) with one line naming the file.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from gridxfer import state as gstate
from gridxfer.errors import GridxferError

APPLYING, APPLIED, RESTORED = "applying", "applied", "restored"


@dataclass(frozen=True)
class Original:
    key: str
    value: str


@dataclass(frozen=True)
class PersistedFile:
    path: str
    previous: str | None = None                # content before gridxfer wrote it; None: absent


class StateWriteError(GridxferError):
    """The state could not be written (full disk, permissions); the previous one is intact."""


@dataclass(frozen=True)
class HostState:
    host: str
    status: str
    profile: str
    originals: tuple[Original, ...] = ()       # in apply order
    updated: float = field(default=0.0)
    files: tuple[PersistedFile, ...] = ()      # sysctl.d files written by --persist

    def to_json(self) -> dict:
        return {"host": self.host, "status": self.status, "profile": self.profile,
                "updated": self.updated,
                "originals": [{"key": o.key, "value": o.value} for o in self.originals],
                "files": [{"path": f.path, "previous": f.previous} for f in self.files]}


def state_path(state_id: str) -> Path:
    return gstate.subdir("tuning") / f"{state_id}.json"


def load(state_id: str) -> HostState | None:
    try:
        path = state_path(state_id)
    except OSError as exc:
        raise StateWriteError(f"cannot create {exc.filename or gstate.home()}: "
                              f"{exc.strerror or exc}") from None
    if not path.exists():
        return None
    try:
        data = gstate.read_json(path)
        return HostState(host=data["host"], status=data["status"], profile=data["profile"],
                         updated=float(data.get("updated", 0)),
                         originals=tuple(Original(o["key"], o["value"])
                                         for o in data.get("originals", [])),
                files=tuple(PersistedFile(f["path"], f.get("previous"))
                            for f in data.get("files", [])))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise GridxferError(f"{path}: unreadable tuning state ({exc}); fix or remove it") from None


def save(state_id: str, st: HostState) -> HostState:
    st = replace(st, updated=time.time())
    try:
        path = state_path(state_id)
        gstate.write_json(path, st.to_json())
    except OSError as exc:
        where = exc.filename or gstate.home()
        raise StateWriteError(f"cannot save the tuning state of {st.host} in {where}: "
                              f"{exc.strerror or exc}") from None
    return st


def merge_originals(old: HostState | None, current: dict[str, str]) -> tuple[Original, ...]:
    """Keep originals recorded earlier; add the current value of keys seen for the first time."""
    kept = list(old.originals) if old and old.status != RESTORED else []
    known = {o.key for o in kept}
    return tuple(kept + [Original(k, v) for k, v in current.items() if k not in known])


def merge_files(old: HostState | None, new: PersistedFile | None) -> tuple[PersistedFile, ...]:
    """Keep files recorded earlier (with their first ``previous``); add ``new`` if unseen."""
    kept = list(old.files) if old and old.status != RESTORED else []
    if new is not None and all(f.path != new.path for f in kept):
        kept.append(new)
    return tuple(kept)


@contextlib.contextmanager
def host_lock(state_id: str, label: str) -> Iterator[None]:
    """One apply/rollback per host at a time (flock on ``<host>.lock`` beside the state)."""
    try:
        path = gstate.subdir("tuning") / f"{state_id}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise StateWriteError(f"{label}: cannot create the lock in "
                              f"{exc.filename or gstate.home()}: {exc.strerror or exc}; "
                              "nothing written") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise GridxferError(f"{label}: another gridxfer tune apply/rollback is running "
                                f"(lock {path})") from None
        yield
    finally:
        os.close(fd)
