"""The series of tape samples from a set of logs, read incrementally.

:func:`read_series` tails every log (:mod:`.logtail`), parses the new complete lines with
the log's format parser, counts the unparsable ones per format, and keeps the samples of
earlier runs in the same ``nagiosplugin.Cookie`` for as long as the window needs them.
It returns plain data (:class:`TapeRead`); judging is the check's business.
:class:`TapeLogs` is the MonitoringSource over it (CTA, dCache and JSON-lines logs alike:
they differ only in the line parser).
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from collections.abc import Iterable

import nagiosplugin

from gridxfer.monitoring.series import Series, Window
from gridxfer.monitoring.sources.logtail import require_regular, tail
from gridxfer.monitoring.sources.tapelog import Parser, TapeSession

_FIELDS = {f.name for f in fields(TapeSession)}


@dataclass(frozen=True)
class LogSource:
    path: Path
    parse: Parser
    fmt: str = "log"               # cta | dcache | jsonl: names the garbage counts


@dataclass(frozen=True)
class TapeRead:
    sessions: list[TapeSession]
    garbage: dict[str, int] = field(default_factory=dict)   # format -> unparsable lines
    lost: tuple[str, ...] = ()                              # rotations not followed

    @property
    def garbage_total(self) -> int:
        return sum(self.garbage.values())


def _load(cookie: nagiosplugin.Cookie) -> tuple[list[TapeSession], dict]:
    try:
        with cookie:
            remembered = list(cookie.get("sessions", []))
            saved = {k: v for k, v in cookie.items() if k != "sessions"}
    except ValueError:          # damaged cookie: nagiosplugin truncated it; start again
        return [], {}
    out = [TapeSession(**{k: v for k, v in item.items() if k in _FIELDS})
           for item in remembered if isinstance(item, dict)]
    return out, saved


def _feed(lines: Iterable[bytes], src: LogSource, sessions: list[TapeSession],
          garbage: dict[str, int]) -> None:
    for raw in lines:
        if not raw:                      # overlong line (logtail marks it with b"")
            garbage[src.fmt] = garbage.get(src.fmt, 0) + 1
            continue
        line = raw.decode("utf-8", "replace").strip()
        if not line:
            continue
        try:
            session = src.parse(line, src.path)
        except (ValueError, KeyError, TypeError, ArithmeticError):
            garbage[src.fmt] = garbage.get(src.fmt, 0) + 1
            continue
        if session is not None:
            sessions.append(session)


def read_series(sources: list[LogSource], cookie_path: Path | None, *,
                keep_after: float) -> TapeRead:
    """New samples from every log plus those remembered, sorted by end time.

    ``cookie_path`` None reads every log from the start and remembers nothing.
    """
    cookie = nagiosplugin.Cookie(str(cookie_path) if cookie_path else None)
    sessions, saved = _load(cookie) if cookie_path else ([], {})
    garbage: dict[str, int] = {}
    lost: list[str] = []
    positions: dict[str, dict] = {}
    for src in sources:
        path = Path(os.path.abspath(src.path))
        require_regular(path)
        result = tail(path, saved.get(str(path)) if cookie_path else None)
        _feed(result.lines, src, sessions, garbage)
        positions[str(path)] = result.position
        if result.lost:
            lost.append(result.lost)
    keep = sorted({s for s in sessions if s.end >= keep_after}, key=lambda s: s.end)
    if cookie_path:
        with cookie:
            cookie.clear()
            cookie.update(positions)
            cookie["sessions"] = [asdict(s) for s in keep]
    return TapeRead(keep, garbage, tuple(lost))


def read_sessions(paths: list[tuple[Path, Parser]], cookie_path: Path | None, *,
                  keep_after: float) -> tuple[list[TapeSession], int]:
    """(sessions, unparsable lines) for ``(path, parser)`` pairs (older callers)."""
    got = read_series([LogSource(p, f) for p, f in paths], cookie_path, keep_after=keep_after)
    return got.sessions, got.garbage_total


@dataclass(frozen=True)
class TapeLogs:
    """Tape logs as a MonitoringSource: the sessions that end after ``window.start -
    window.seconds`` (a kill logged before the window and sessions that end after it are
    in the series: the aggregate needs them), and the unparsable lines per format.

    ``cookie`` None reads every log from the start and remembers nothing."""

    logs: tuple[LogSource, ...]
    cookie: Path | None = None
    kind: str = "tape"

    def series(self, window: Window) -> Series[TapeSession]:
        read = read_series(list(self.logs), self.cookie,
                           keep_after=window.end - 2 * window.seconds)
        return Series(window, tuple(read.sessions), unparsable=read.garbage, notes=read.lost,
                      inputs=len(self.logs))
