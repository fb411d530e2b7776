"""The sysctl.d file ``tune apply --persist`` writes on a target: where it goes, what it
held before gridxfer wrote it (kept in the host's state, ``state.PersistedFile``), and
putting that back on rollback or a failed apply (removing it when it did not exist).
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from gridxfer.tuning import state as tstate
from gridxfer.tuning.targets.base import TargetError, TuningTarget


def directory() -> Path:
    """Where ``tune apply --persist`` writes (``$GRIDXFER_SYSCTL_DIR``)."""
    return Path(os.environ.get("GRIDXFER_SYSCTL_DIR") or "/etc/sysctl.d")


def path_for(profile: str) -> str:
    """The sysctl.d file of ``profile``."""
    return str(directory() / f"90-gridxfer-{profile}.conf")


def content(target: TuningTarget, path: str) -> str | None:
    """What ``path`` holds on the target now; None when it does not exist."""
    res = target.run(["cat", "--", path])
    if res.ok:
        return res.stdout
    exists = target.run(["test", "-e", path])
    if exists.ok:
        raise TargetError(f"{target.label}: cannot read {path}: {res.first_error_line()}")
    return None


def restore(target: TuningTarget, files: Sequence[tstate.PersistedFile]
                   ) -> list[tuple[str, str]]:
    """Put back what each file held before gridxfer wrote it (remove it if nothing)."""
    failed: list[tuple[str, str]] = []
    for f in reversed(files):
        try:
            if f.previous is None:
                res = target.run(["rm", "-f", "--", f.path])
                if not res.ok:
                    failed.append((f.path, res.first_error_line()))
            else:
                target.put_file(f.path, f.previous)
        except TargetError as exc:
            failed.append((f.path, str(exc)))
    return failed
