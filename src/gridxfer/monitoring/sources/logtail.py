"""Read only the complete lines added to a log since the last check, across rotation.

Positions (inode, offset) are kept in a ``nagiosplugin.Cookie`` (the same JSON state file
that keeps the recent sessions). ``nagiosplugin.LogTail`` is not used for the reading
itself, for two reasons found in its code (nagiosplugin 1.4, ``logtail.py``):

- it yields the last line even when it has no newline yet and saves the position after
  it, so a line that cta-taped is half-way through writing is lost (its start is read
  as garbage now, its end as garbage next time). Here a line without its newline is left
  for the next run;
- after a rotation it starts the new file from 0 and forgets the old one, so the lines
  written between the last check and the rotation are lost. Here the rest of the old
  file is read first. It is found by inode next to the log (``log.1``, ``log-20261121``)
  or in an ``old/`` directory beside it, as CTA's packaged logrotate file does
  (``olddir /var/log/cta/old``, ``dateext``, ``dateformat -%Y%m%d-%s``, ``hourly``,
  ``delaycompress``: the newest rotated file stays uncompressed for one cycle).

A rotated file that cannot be found any more (compressed, or rotated twice between two
checks) is reported, not silently skipped.
"""
from __future__ import annotations

import glob
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from collections.abc import Iterator

MAX_LINE = 65536          # a CTA session line is a few kB; longer lines are garbage
COMPRESSED = (".gz", ".bz2", ".xz", ".zst")


@dataclass(frozen=True)
class TailResult:
    lines: list[bytes]             # complete lines (newline stripped); b"" marks an overlong one
    position: dict                 # {"inode": int, "pos": int} to save for the next run
    lost: str = ""                 # why some lines may be missing ("" when none)


def require_regular(path: Path) -> None:
    """A FIFO, socket or device would block ``open`` (or never end): refuse it up front."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise ValueError(f"{path}: not a regular file")


def _complete_lines(fh: BinaryIO, start: int, *, final: bool) -> tuple[list[bytes], int]:
    """Complete lines from ``start``; returns them and the offset after the last one.

    ``final``: the file is no longer written (rotated away): a last line without its
    newline is read as well.
    """
    fh.seek(start)
    out: list[bytes] = []
    pos = start
    while True:
        raw = fh.readline(MAX_LINE + 1)
        if not raw:
            return out, pos
        if not raw.endswith(b"\n") and len(raw) <= MAX_LINE:
            if final:
                out.append(raw)
                pos += len(raw)
            return out, pos              # half-written: read it next time
        pos += len(raw)
        if len(raw) > MAX_LINE:          # overlong: skip to the end of that line
            while raw and not raw.endswith(b"\n"):
                raw = fh.readline(MAX_LINE + 1)
                pos += len(raw)
            if not raw and not final:
                return out, pos          # still being written; the rest is skipped next time
            out.append(b"")
            continue
        out.append(raw.rstrip(b"\r\n"))


def rotation_candidates(path: Path) -> Iterator[Path]:
    """Where logrotate may have put ``path``: beside it or in ``old/``, uncompressed."""
    seen: set[str] = set()
    for folder in (path.parent, path.parent / "old"):
        base = glob.escape(str(folder / path.name))
        for cand in sorted(glob.glob(base + ".*") + glob.glob(base + "-*"), reverse=True):
            if cand not in seen and not cand.endswith(COMPRESSED):
                seen.add(cand)
                yield Path(cand)


def _find_inode(path: Path, inode: int) -> Path | None:
    for cand in rotation_candidates(path):
        try:
            if os.stat(cand).st_ino == inode:
                return cand
        except OSError:
            continue
    return None


def tail(path: Path, saved: dict | None) -> TailResult:
    """New complete lines of ``path`` since ``saved`` (None: the whole file)."""
    require_regular(path)
    saved = saved or {}
    inode, pos = saved.get("inode"), int(saved.get("pos", 0))
    lines: list[bytes] = []
    lost = ""
    with open(path, "rb") as fh:
        current = os.fstat(fh.fileno())
        if inode is not None and current.st_ino != inode:
            old = _find_inode(path, inode)
            if old is None:
                lost = (f"{path.name} was rotated and the previous file was not found "
                        f"(compressed or rotated twice?): its last lines are not counted")
            else:
                with open(old, "rb") as ofh:
                    size = os.fstat(ofh.fileno()).st_size
                    lines, _ = _complete_lines(ofh, pos if size >= pos else 0, final=True)
            pos = 0
        elif current.st_size < pos:            # truncated in place (copytruncate)
            pos = 0
        new, end = _complete_lines(fh, pos, final=False)
    return TailResult(lines + new, {"inode": current.st_ino, "pos": end}, lost)
