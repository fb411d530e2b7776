"""What the EMULATED tape drives (testbed/tape.py) work on: a queue of tape jobs.

A drive asks ``claim(kind)`` for a job (``archive``: write a file to tape; ``retrieve``:
read one back), "moves" it at the drive's rate, then calls ``done(job)``, or
``giveback(job)`` when the drive failed or stopped mid-file. Two queues exist:

- ``DrainQueue`` (here): the plain disk buffer the drives drain. A file is taken by renaming
  it into ``.tape-staging/<drive>/`` (atomic: no two drives take the same file) and deleted
  once written. Dot files and ``*.part``/``*.tmp`` names (transfers in progress) are left alone.
- ``testbed.tapestore.ArchiveQueue``: the tape behind a real xrootd (disk copy kept, tape
  copy recorded, stage requests served), whose state XRootD reports through ``query prepare``.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

Kind = Literal["archive", "retrieve"]
STAGING = ".tape-staging"


@dataclass(frozen=True)
class TapeJob:
    path: Path          # what the drive reads (archive) or the tape copy (retrieve)
    size: int
    kind: Kind = "archive"
    key: str = ""       # the queue's own name for the job (e.g. the file's relative path)


class TapeQueue(Protocol):
    def claim(self, drive: str, kind: Kind | None, limit: int) -> TapeJob | None:
        """The next job for ``drive`` (of ``kind``; None: any kind), at most ``limit``
        bytes (what is left on the cartridge), or None when there is nothing to do."""
        ...

    def done(self, job: TapeJob) -> None: ...

    def giveback(self, job: TapeJob) -> None: ...


def movable(name: str) -> bool:
    """Files a drive may take: not dot files (gridxfer temporary names), not *.part/*.tmp."""
    return not name.startswith(".") and not name.endswith((".part", ".tmp"))


class DrainQueue:
    """The disk buffer drained to tape: files are renamed away, written, deleted."""

    def __init__(self, buffer: Path, min_age: float = 0.0) -> None:
        self.buffer, self.min_age = buffer, min_age
        self._origin: dict[Path, Path] = {}
        self._seq = itertools.count()
        self._lock = threading.Lock()

    def claim(self, drive: str, kind: Kind | None, limit: int) -> TapeJob | None:
        if kind == "retrieve":
            return None
        staging = self.buffer / STAGING / drive
        staging.mkdir(parents=True, exist_ok=True)
        now = time.time()
        for root, dirs, files in os.walk(self.buffer):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                if not movable(name):
                    continue
                src = Path(root) / name
                try:
                    st = src.stat()
                    if now - st.st_mtime < self.min_age or st.st_size > limit:
                        continue                # still being written / does not fit
                    dst = staging / f"{next(self._seq)}-{name}"
                    os.rename(src, dst)
                except FileNotFoundError:      # another drive took it
                    continue
                with self._lock:
                    self._origin[dst] = src
                return TapeJob(dst, st.st_size)
        return None

    def done(self, job: TapeJob) -> None:
        job.path.unlink()
        with self._lock:
            self._origin.pop(job.path, None)

    def giveback(self, job: TapeJob) -> None:
        with self._lock:
            origin = self._origin.pop(job.path, None)
        if origin is not None:
            with contextlib.suppress(OSError):
                os.rename(job.path, origin)
