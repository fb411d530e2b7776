"""The EMULATED tape behind a tape-backed testbed xrootd: its catalogue and its job queue.

THIS IS AN EMULATION (no tape hardware). A tape-backed server directory holds::

    data/              xrootd's exported /data: the disk buffer (disk copies)
    tape/store/        the tape copies: hard links to the migrated disk files (no extra bytes)
    tape/requests/     stage requests (one file each), written by the prepare program
                       (testbed/tapegpi.py, run by xrootd's libXrdOfsPrepGPI), read by the drives

A file's residency (``movers.tape.Residency``) follows from the two names: disk and tape
copy of the SAME inode -> ON_TAPE; a disk copy only (or a newer one: another inode) ->
DISK_ONLY; a tape copy only -> TAPE_ONLY (offline: purged or evicted); neither -> MISSING.
``ArchiveQueue`` is the drives' ``TapeQueue``: retrieve jobs (pending stage requests of
offline files) first, then archive jobs (DISK_ONLY files unmodified for ``min_age``).
Migration links the file into the store; with ``purge_after_migration`` the disk copy is
then removed (staging becomes real). A recall links the tape copy back into ``data/``.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from gridxfer.movers.tape import Residency
from gridxfer.testbed.tapequeue import Kind, TapeJob, movable

EXPORT = "/data"


@dataclass(frozen=True)
class TapeLayout:
    data: Path
    store: Path
    requests: Path

    @classmethod
    def of(cls, server_dir: Path) -> TapeLayout:
        server_dir = Path(server_dir)
        return cls(server_dir / "data", server_dir / "tape" / "store",
                   server_dir / "tape" / "requests")

    def create(self) -> None:
        for d in (self.data, self.store, self.requests):
            d.mkdir(parents=True, exist_ok=True)

    def relative(self, lfn: str) -> str | None:
        """``/data/a/b`` (or ``//data/a/b``) -> ``a/b``; None for anything outside the export
        or climbing out of it."""
        path = "/" + lfn.split("?", 1)[0].lstrip("/")
        if not path.startswith(EXPORT + "/"):
            return None
        rel = path[len(EXPORT) + 1:]
        parts = rel.split("/")
        if not rel or any(p in ("", ".", "..") for p in parts):
            return None
        return rel

    def residency(self, rel: str) -> Residency:
        disk, tape = _inode(self.data / rel), _inode(self.store / rel)
        if disk is not None:
            return Residency.ON_TAPE if disk == tape else Residency.DISK_ONLY
        return Residency.TAPE_ONLY if tape is not None else Residency.MISSING

    # --- stage requests ---------------------------------------------------------------
    def add_request(self, request_id: str, rels: Iterable[str]) -> None:
        """Record a stage request (atomically: write a dot file, rename)."""
        body = "\n".join([request_id, *rels]) + "\n"
        name = f"{time.time_ns()}-{uuid.uuid4().hex[:8]}.req"
        tmp = self.requests / f".{name}"
        tmp.write_text(body, encoding="utf-8")
        os.replace(tmp, self.requests / name)

    def requests_pending(self) -> Iterator[tuple[Path, str, list[str]]]:
        """(file, request id, relative paths) of every recorded stage request, oldest first."""
        for path in sorted(self.requests.glob("*.req")):
            with contextlib.suppress(FileNotFoundError):
                lines = path.read_text(encoding="utf-8").splitlines()
                if lines:
                    yield path, lines[0], [r for r in lines[1:] if r]

    def requested(self) -> set[str]:
        return {rel for _, _, rels in self.requests_pending() for rel in rels}

    def evict(self, rel: str) -> bool:
        """Remove the disk copy of a file that is on tape (XRootD ``prepare -e``)."""
        if self.residency(rel) is not Residency.ON_TAPE:
            return False
        with contextlib.suppress(FileNotFoundError):
            (self.data / rel).unlink()
        return True


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return (st.st_dev, st.st_ino)


def _link(src: Path, dst: Path, owner_of: Path) -> None:
    """Hard-link ``src`` to ``dst`` (replacing it), creating parents owned like ``owner_of``."""
    parent = dst.parent
    if not parent.is_dir():
        parent.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            st = owner_of.stat()
            here = parent
            while here != owner_of and here.is_relative_to(owner_of):
                os.chown(here, st.st_uid, st.st_gid)
                here = here.parent
    tmp = parent / f".{dst.name}.tape-{uuid.uuid4().hex[:8]}"
    os.link(src, tmp)
    os.replace(tmp, dst)


class ArchiveQueue:
    """The drives' queue for a tape-backed xrootd (see the module docstring)."""

    def __init__(self, layout: TapeLayout, min_age: float = 1.0,
                 purge_after_migration: bool = False) -> None:
        self.layout, self.min_age, self.purge = layout, min_age, purge_after_migration
        self._claimed: set[str] = set()
        self._lock = threading.Lock()

    def _take(self, rel: str, still: Residency) -> bool:
        """Claim ``rel`` if no drive has it AND it is still ``still`` once claimed (another
        drive may have finished it between our scan and the claim: no double write)."""
        with self._lock:
            if rel in self._claimed:
                return False
            self._claimed.add(rel)
        if self.layout.residency(rel) is still:
            return True
        self._free(rel)
        return False

    def _free(self, rel: str) -> None:
        with self._lock:
            self._claimed.discard(rel)

    def claim(self, drive: str, kind: Kind | None, limit: int) -> TapeJob | None:
        if kind in (None, "retrieve"):
            job = self._claim_retrieve(limit)
            if job is not None or kind == "retrieve":
                return job
        return self._claim_archive(limit)

    def _claim_retrieve(self, limit: int) -> TapeJob | None:
        lay = self.layout
        for path, _, rels in lay.requests_pending():
            waiting = [r for r in rels if lay.residency(r) is Residency.TAPE_ONLY]
            if not waiting and not any(r in self._claimed for r in rels):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()              # every file online (or gone): request served
                continue
            for rel in waiting:
                with contextlib.suppress(FileNotFoundError):
                    size = (lay.store / rel).stat().st_size
                    if size <= limit and self._take(rel, Residency.TAPE_ONLY):
                        return TapeJob(lay.store / rel, size, "retrieve", rel)
        return None

    def _claim_archive(self, limit: int) -> TapeJob | None:
        lay, now = self.layout, time.time()
        for root, dirs, files in os.walk(lay.data):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                if not movable(name):
                    continue
                path = Path(root) / name
                rel = str(path.relative_to(lay.data))
                try:
                    st = path.stat()
                except FileNotFoundError:
                    continue
                if (now - st.st_mtime < self.min_age or st.st_size > limit
                        or lay.residency(rel) is not Residency.DISK_ONLY):
                    continue
                if self._take(rel, Residency.DISK_ONLY):
                    return TapeJob(path, st.st_size, "archive", rel)
        return None

    def done(self, job: TapeJob) -> None:
        lay = self.layout
        try:
            if job.kind == "archive":
                disk = lay.data / job.key
                with contextlib.suppress(FileNotFoundError):     # deleted meanwhile: nothing
                    if disk.stat().st_size == job.size:
                        _link(disk, lay.store / job.key, lay.store)
                        if self.purge:
                            lay.evict(job.key)
            elif lay.residency(job.key) is Residency.TAPE_ONLY:
                _link(lay.store / job.key, lay.data / job.key, lay.data)
        finally:
            self._free(job.key)

    def giveback(self, job: TapeJob) -> None:
        self._free(job.key)
