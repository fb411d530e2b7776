"""Write-to-tape sessions read incrementally from logs, and their window aggregates.

Each source format (``cta``, ``dcache``, ``jsonl``) turns one log line into a
:class:`TapeSession` or None. :func:`read_sessions` reads only the lines that are new
since the last run with ``nagiosplugin.LogTail`` + ``Cookie``; when the log was rotated
since then, the rest of the rotated file (``<log>.1``, ``<log>-*``, found by inode) is
read first, so nothing written just before the rotation is lost. Sessions seen in
earlier runs are kept in the same cookie for as long as the window needs them.
"""
from __future__ import annotations

import glob
import os
import stat
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable

import nagiosplugin

MAX_LINE = 16384          # a CTA session line is a few kB; longer lines are garbage
Parser = Callable[[str, Path], "TapeSession | None"]


@dataclass(frozen=True)
class TapeSession:
    end: float               # unix time the session (or file flush) finished
    duration: float          # seconds of tape I/O attributed to it (> 0)
    bytes: int
    unit: str                # tape drive (CTA, JSON) or pool (dCache billing)
    vid: str = ""
    files: int = 0
    kind: str = ""           # ArchiveForUser / ArchiveForRepack / store ...
    ok: bool = True
    emulated: bool = False   # written by gridxfer.testbed.tape (EMULATED tape)

    @property
    def start(self) -> float:
        return self.end - self.duration


@dataclass(frozen=True)
class TapeWindow:
    """Write-to-tape over a window. ``rate`` = sum over units of bytes / busy time."""

    start: float
    end: float
    sessions: int
    filtered: int                   # sessions dropped by the minimum-volume filter
    bytes: float                    # prorated to the window
    per_unit: dict[str, float]      # unit -> bytes/s while busy (units not down)
    down: tuple[str, ...] = ()      # units whose last session in the window failed
    emulated: bool = False          # some sessions came from the EMULATED tape

    @property
    def rate(self) -> float:
        return sum(self.per_unit.values())

    @property
    def units(self) -> int:
        return len(self.per_unit)

    @property
    def per_unit_rate(self) -> float:
        return self.rate / self.units if self.units else 0.0

    @property
    def volume_rate(self) -> float:
        """Bytes actually written per second of window (what drains a buffer)."""
        span = self.end - self.start
        return self.bytes / span if span > 0 else 0.0


def _busy_time(intervals: list[tuple[float, float]]) -> float:
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None and cur_s is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None and cur_s is not None:
        total += cur_e - cur_s
    return total


def aggregate(sessions: Iterable[TapeSession], *, now: float, window: float,
              min_volume: int = 0, kinds: frozenset[str] | None = None) -> TapeWindow:
    """Sessions that finished inside ``[now - window, now]``, per unit and in total.

    A unit whose latest session in the window failed (CTA ``status="failure"``: the
    drive went down) is reported in ``down`` and left out of the rates.
    """
    start = now - window
    chosen: list[TapeSession] = []
    last: dict[str, TapeSession] = {}
    filtered = 0
    prorated = 0.0
    for s in sessions:
        if kinds is not None and s.kind not in kinds:
            continue
        if s.end > now or s.end < start:
            # a long session that ended later still wrote partly inside the window
            if s.end > now and s.start < now:
                prorated += s.bytes * (now - max(s.start, start)) / s.duration
            continue
        if s.unit not in last or s.end >= last[s.unit].end:
            last[s.unit] = s
        if s.bytes < min_volume:
            filtered += 1
            continue
        chosen.append(s)
        prorated += s.bytes * (s.end - max(s.start, start)) / s.duration
    down = tuple(sorted(u for u, s in last.items() if not s.ok))
    per_unit: dict[str, float] = {}
    by_unit: dict[str, list[TapeSession]] = {}
    for s in chosen:
        if s.unit in down:
            continue
        by_unit.setdefault(s.unit, []).append(s)
    for unit, items in sorted(by_unit.items()):
        busy = _busy_time([(s.start, s.end) for s in items])
        if busy > 0:
            per_unit[unit] = sum(s.bytes for s in items) / busy
    return TapeWindow(start=start, end=now, sessions=len(chosen), filtered=filtered,
                      bytes=prorated, per_unit=per_unit, down=down,
                      emulated=any(s.emulated for s in chosen))


def _rotated_remainder(path: Path, saved: dict) -> list[bytes]:
    """Lines appended to the previous file (same inode) after our last position."""
    inode, pos = saved.get("inode"), saved.get("pos", 0)
    if inode is None:
        return []
    try:
        if os.stat(path).st_ino == inode:
            return []
    except FileNotFoundError:
        pass
    pattern = glob.escape(str(path))
    for cand in sorted(set(glob.glob(pattern + ".*") + glob.glob(pattern + "-*"))):
        try:
            if os.stat(cand).st_ino != inode or cand.endswith((".gz", ".bz2", ".xz", ".zst")):
                continue
            with open(cand, "rb") as fh:
                fh.seek(pos if os.fstat(fh.fileno()).st_size >= pos else 0)
                return fh.readlines()
        except OSError:
            continue
    return []


def _require_regular(path: Path) -> None:
    """A FIFO, socket or device would block ``open`` (or never end): refuse it up front."""
    mode = os.stat(path).st_mode          # FileNotFoundError etc. become UNKNOWN upstream
    if not stat.S_ISREG(mode):
        raise ValueError(f"{path}: not a regular file")


def read_sessions(paths: list[tuple[Path, Parser]], cookie_path: Path | None, *,
                  keep_after: float) -> tuple[list[TapeSession], int]:
    """New sessions from every log plus those remembered; returns (sessions, garbage lines).

    ``cookie_path`` None reads every log from the start and remembers nothing.
    """
    cookie = nagiosplugin.Cookie(str(cookie_path) if cookie_path else None)
    try:
        with cookie:
            remembered = list(cookie.get("sessions", []))
            saved = {k: v for k, v in cookie.items() if k != "sessions"}
    except ValueError:          # damaged cookie: nagiosplugin truncated it; start again
        remembered, saved = [], {}
    sessions = [TapeSession(**item) for item in remembered if isinstance(item, dict)]
    garbage = 0

    def feed(raw_lines: Iterable[bytes], path: Path, parse: Parser) -> None:
        nonlocal garbage
        for raw in raw_lines:
            if len(raw) > MAX_LINE:
                garbage += 1
                continue
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            try:
                session = parse(line, path)
            except (ValueError, KeyError, TypeError, ArithmeticError):
                garbage += 1
                continue
            if session is not None:
                sessions.append(session)

    for path, parse in paths:
        abspath = Path(os.path.abspath(path))
        _require_regular(abspath)
        if not cookie_path:
            with open(abspath, "rb") as fh:
                feed(fh, abspath, parse)
            continue
        feed(_rotated_remainder(abspath, saved.get(str(abspath), {})), abspath, parse)
        with open(abspath, "rb"):   # fail cleanly here: LogTail's __exit__ cannot
            pass
        tail = nagiosplugin.LogTail(str(abspath), cookie)
        with tail as lines:
            feed(lines, abspath, parse)
    keep = sorted({s for s in sessions if s.end >= keep_after}, key=lambda s: s.end)
    if cookie_path:
        with cookie:
            cookie["sessions"] = [asdict(s) for s in keep]
    return keep, garbage
