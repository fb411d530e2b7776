"""Timestamps in tape logs: the log's time zone and dates written without a year.

cta-taped's text logger writes ``%b %e %T.<ns>`` in the server's local time (no year, no
zone); rsyslog's traditional header is the same without the fraction; dCache billing
writes ``MM.dd HH:mm:ss`` (no year, no zone). Those wall-clock times are read in the
log's zone (``--log-tz``, default: the checker's own). Timestamps that carry an offset
(RFC 3339 headers, CTA JSON ``local_time``, dCache JSON ``date``) or are epoch seconds
(CTA JSON ``epoch_time``) do not depend on it.

A yearless date takes the year of its reference time (the check's time, or the day in a
dCache file name), or the year before when that would put it more than a day after the
reference: a 31 December record read in January belongs to the old year.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}
FUTURE_TOLERANCE = 300.0     # clock skew accepted before a line counts as "in the future"

# rsyslog RFC 3339 / ISO header, or a traditional/CTA "Nov  3 10:11:12[.123456789]" one
ISO_HEAD = re.compile(
    r"^(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?)\s")
SYSLOG_HEAD = re.compile(r"^([A-Z][a-z]{2}) +(\d{1,2}) (\d\d):(\d\d):(\d\d)(?:\.(\d+))?\s")


def zone_arg(text: str) -> str:
    """Validate an IANA zone name (``Europe/Zurich``, ``UTC``); ValueError otherwise."""
    try:
        ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:    # OSError: a name too long
        raise ValueError(f"unknown time zone {text[:60]!r} (use an IANA name such as "
                         f"Europe/Zurich or UTC)") from exc
    return text


@dataclass(frozen=True)
class LogClock:
    """How to turn a log's wall-clock times into unix time."""

    zone: str | None = None      # IANA name of the log's zone; None: the checker's local zone
    now: float = 0.0             # the check's time: reference for yearless dates

    def _tz(self) -> tzinfo | None:
        return ZoneInfo(self.zone) if self.zone else None

    @property
    def zone_name(self) -> str:
        return self.zone or "the checker's local zone"

    def wall(self, year: int, month: int, day: int, hour: int, minute: int, second: int,
             frac: float = 0.0) -> float:
        naive = datetime(year, month, day, hour, minute, second)
        tz = self._tz()
        ts = naive.replace(tzinfo=tz).timestamp() if tz else naive.timestamp()
        return ts + frac

    def yearless(self, month: int, day: int, hour: int, minute: int, second: int,
                 frac: float = 0.0, ref: float | None = None) -> float:
        ref = self.now if ref is None else ref
        year = datetime.fromtimestamp(ref, self._tz()).year
        try:
            ts = self.wall(year, month, day, hour, minute, second, frac)
        except ValueError:                  # 29 February of a non-leap year
            ts = float("inf")
        if ts > ref + 86400:
            ts = self.wall(year - 1, month, day, hour, minute, second, frac)
        return ts

    def iso(self, text: str) -> float:
        """An ISO 8601 / RFC 3339 time; without an offset it is wall time in the log's zone."""
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
        if dt.tzinfo is None:
            tz = self._tz()
            return dt.replace(tzinfo=tz).timestamp() if tz else dt.timestamp()
        return dt.timestamp()

    def header(self, line: str) -> float | None:
        """The time of a syslog/ISO line header, or None when the line has none."""
        if (m := ISO_HEAD.match(line)):
            return self.iso(m.group(1))
        if (m := SYSLOG_HEAD.match(line)) and m.group(1) in MONTHS:
            frac = float(f"0.{m.group(6)}") if m.group(6) else 0.0
            return self.yearless(MONTHS[m.group(1)], int(m.group(2)), int(m.group(3)),
                                 int(m.group(4)), int(m.group(5)), frac)
        return None
