"""Tape sessions (typed samples read from logs) and their window aggregate.

Each source format (``cta``, ``dcache``, ``jsonl``) turns one log line into a
:class:`TapeSession` (a frozen sample, with the ``time``/``value``/``labels`` of
``monitoring.series.Sample``), or None for a line that is not about tape
sessions, or raises ValueError for an unparsable line. :mod:`.logtail` reads the lines
incrementally; :func:`aggregate` judges nothing: it only sums a window (the check compares
the figures with thresholds).

Rules of the aggregate (checks/README.md says the same):

- the write rate is the sum over units (drive, or dCache pool) of the bytes of the write
  sessions that finished in the window, divided by the unit's busy time (the union of
  its session intervals, so concurrent flushes of one pool are not double counted);
- ``--min-volume`` leaves out CTA sessions (and JSONL records) that wrote less; it does
  not apply to dCache ``store`` records, which are one file each;
- a CTA child killed by a signal logs "Tape session finished" twice (see cta.py): the
  second line (``echo``) adds nothing when the first one was seen;
- a unit is *down* when its latest record in the window is a killed session or a
  "putting drive down" event; a unit whose latest session failed or has no status is
  *failing* (CTA: a failure does not by itself make the drive unusable) and still counts.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable, Iterable

Parser = Callable[[str, Path], "TapeSession | None"]
ECHO_SECONDS = 60.0       # a kill line and its echo are logged within the same second


@dataclass(frozen=True)
class TapeSession:
    """One sample: a tape session (CTA), one file flush (dCache) or a drive state event."""

    end: float               # unix time the session (or file flush) finished
    duration: float          # seconds of tape I/O attributed to it (0: no rate from it)
    bytes: int
    unit: str                # tape drive (CTA, JSON) or pool (dCache billing)
    vid: str = ""
    files: int = 0
    kind: str = ""           # ArchiveForUser / ArchiveForRepack / Retrieve / store / restore
    ok: bool = True          # the session reported success
    emulated: bool = False   # written by gridxfer.testbed.tape (EMULATED tape)
    write: bool = True       # a write to tape (counts in the rate); False: reads, labels
    killed: bool = False     # CTA: the session process was killed by a signal
    echo: bool = False       # CTA: the second line logged for a killed session
    event: str = "session"   # session | down | up (a drive put down or up, no data)
    per_file: bool = False   # one record per file (dCache): --min-volume does not apply

    @property
    def start(self) -> float:
        return self.end - self.duration

    @property
    def time(self) -> float:          # the MonitoringSource sample shape (series.Sample)
        return self.end

    @property
    def value(self) -> float:
        return float(self.bytes)

    @property
    def labels(self) -> dict[str, str]:
        return {"unit": self.unit, "vid": self.vid, "kind": self.kind, "event": self.event}

    @property
    def moves_data(self) -> bool:
        return self.event == "session" and self.bytes > 0 and self.duration > 0


@dataclass(frozen=True)
class TapeWindow:
    """Write-to-tape over a window. ``rate`` = sum over units of bytes / busy time."""

    start: float
    end: float
    sessions: int
    filtered: int                   # sessions dropped by the minimum-volume filter
    bytes: float                    # prorated to the window
    per_unit: dict[str, float]      # unit -> bytes/s while busy (units not down)
    down: tuple[str, ...] = ()      # units killed or put down (latest record in the window)
    emulated: bool = False          # some sessions came from the EMULATED tape
    failing: tuple[str, ...] = ()   # units whose latest session failed or has no status
    failed: int = 0                 # write sessions in the window that did not succeed
    reads: int = 0                  # read (Retrieve / restore) sessions in the window
    per_unit_bytes: dict[str, int] = field(default_factory=dict)

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


def busy_time(intervals: Iterable[tuple[float, float]]) -> float:
    """Length of the union of the intervals."""
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


def drop_echoes(sessions: Iterable[TapeSession]) -> list[TapeSession]:
    """Sessions in time order without the echo line of a kill already seen."""
    out: list[TapeSession] = []
    last_kill: dict[str, float] = {}
    for s in sorted(sessions, key=lambda s: (s.end, s.echo)):
        if s.killed and not s.echo:
            last_kill[s.unit] = s.end
        elif s.echo and s.end - last_kill.get(s.unit, float("-inf")) <= ECHO_SECONDS:
            continue
        out.append(s)
    return out


def _state(s: TapeSession) -> str:
    if s.event in ("down", "up"):
        return s.event
    if s.killed:
        return "down"
    return "up" if s.ok else "failing"


def aggregate(sessions: Iterable[TapeSession], *, now: float, window: float,
              min_volume: int = 0, kinds: frozenset[str] | None = None) -> TapeWindow:
    """Records that finished inside ``[now - window, now]``, per unit and in total."""
    start = now - window
    chosen: list[TapeSession] = []
    state: dict[str, str] = {}
    filtered = failed = reads = 0
    prorated = 0.0
    for s in drop_echoes(sessions):
        if kinds is not None and s.kind not in kinds:
            continue
        inside = start <= s.end <= now
        if inside:
            state[s.unit] = _state(s)
        if s.event != "session":
            continue
        if not s.write:
            reads += inside
            continue
        if s.moves_data and s.end > now and s.start < now:
            # a long session that ended later still wrote partly inside the window
            prorated += s.bytes * (now - max(s.start, start)) / s.duration
        if not inside:
            continue
        failed += not s.ok
        if not s.per_file and s.bytes < min_volume:
            filtered += 1
            continue
        chosen.append(s)
        if s.moves_data:
            prorated += s.bytes * (s.end - max(s.start, start)) / s.duration
    down = tuple(sorted(u for u, st in state.items() if st == "down"))
    failing = tuple(sorted(u for u, st in state.items() if st == "failing"))
    by_unit: dict[str, list[TapeSession]] = {}
    for s in chosen:
        if s.unit not in down and s.moves_data:
            by_unit.setdefault(s.unit, []).append(s)
    per_unit: dict[str, float] = {}
    per_unit_bytes: dict[str, int] = {}
    for unit, items in sorted(by_unit.items()):
        busy = busy_time((s.start, s.end) for s in items)
        if busy > 0:
            per_unit_bytes[unit] = sum(s.bytes for s in items)
            per_unit[unit] = per_unit_bytes[unit] / busy
    return TapeWindow(start=start, end=now, sessions=len(chosen), filtered=filtered,
                      bytes=prorated, per_unit=per_unit, down=down,
                      emulated=any(s.emulated for s in chosen), failing=failing,
                      failed=failed, reads=reads, per_unit_bytes=per_unit_bytes)
