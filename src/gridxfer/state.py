"""Where gridxfer keeps its state, and how state files are written.

Everything lives under ``$GRIDXFER_HOME`` (default ``~/.local/share/gridxfer``): an absolute
path, refused when relative (``root``), as a cron job, a daemon or Nagios runs gridxfer
from another directory than the shell that set it, and would find another state.
State files are mode 0600 and written atomically (temp file + fsync + rename), so a
crash leaves either the old or the new content, never half of one.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from gridxfer.errors import UsageError

HOME_ENV = "GRIDXFER_HOME"


def root() -> Path:
    """The state root as configured, not created: ``$GRIDXFER_HOME``, else the default.
    UsageError (exit 2, one line naming the variable) when it is relative, or names
    something that exists and is not a directory. ``cli/main`` asks it when a command
    starts."""
    raw = os.environ.get(HOME_ENV, "")
    if not raw:
        return Path.home() / ".local/share/gridxfer"
    path = Path(raw)
    if not path.is_absolute():
        raise UsageError(f"{HOME_ENV}={raw!r}: not an absolute path (a cron job or a "
                         f"daemon runs in another directory; give the full path)")
    for up in (path, *path.parents):     # the nearest one that exists: a directory
        if os.path.lexists(up):
            if not os.path.isdir(up):
                where = "" if up == path else f" ({up} is not a directory)"
                raise UsageError(f"{HOME_ENV}={raw!r}: not a directory{where}")
            break
    return path


def home() -> Path:
    """The state root (``root``); created (0700) on first use."""
    path = root()
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def shared_mode(directory: Path) -> int:
    """The mode of a journal or lock file created in ``directory``: 0640 when the directory
    is set-group-ID (the admin shares it with a group, e.g. ``nagios``: the files take the
    directory's group, and that group may read them), else 0600."""
    try:
        return 0o640 if os.stat(directory).st_mode & 0o2000 else 0o600
    except OSError:
        return 0o600


def subdir(name: str) -> Path:
    """``$GRIDXFER_HOME/<name>``, created 0700."""
    path = home() / name
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def write_atomic(path: Path, data: str | bytes, mode: int = 0o600, *,
                 make_parents: bool = True) -> None:
    """Write ``data`` to ``path`` atomically with the given mode. ``make_parents=False``
    for a path the user named: a missing directory is an error (ENOENT), not created."""
    path = Path(path)
    if make_parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    elif not path.parent.is_dir():
        raise FileNotFoundError(errno.ENOENT, "no such directory", str(path.parent))
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json(path: Path, obj: Any) -> None:
    """Readable JSON (indented, sorted keys), atomically, mode 0600."""
    write_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)
