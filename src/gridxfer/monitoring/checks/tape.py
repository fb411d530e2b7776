"""check_gridxfer_tape: write-to-tape throughput from CTA, dCache billing or JSON-lines logs.

Logs are read incrementally (complete lines only, positions in a nagiosplugin Cookie,
rotation into old/ followed); the write sessions that finished in the window give the
aggregate rate (sum over drives of bytes / busy time), the active drives and the
per-drive rate. CTA sessions smaller than --min-volume are left out so that short
sessions do not distort the rate. A drive is down when its latest record in the window
is a killed session or a "putting drive down" event; a failed session alone does not
put it down. Records in the future (beyond 5 min) make the check UNKNOWN: the log's time
zone is probably not the checker's (--log-tz).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import nagiosplugin

from gridxfer.units import _show, fmt_bytes, fmt_duration, fmt_rate, parse_size
from gridxfer.monitoring import baseline as bl
from gridxfer.monitoring.nagios import (GxCheck, GxResource, IdleContext, LineSummary,
                                        PluginParser, PluginUsage, run_plugin)
from gridxfer.monitoring.pluginargs import (duration_arg, path_arg, range_arg, state_file_arg,
                                            timestamp_arg,
                                            typed)
from gridxfer.monitoring.plugintext import perf_label
from gridxfer.monitoring.sources import cta, dcache, jsonl
from gridxfer.monitoring.sources.logtime import FUTURE_TOLERANCE, LogClock, zone_arg
from gridxfer.monitoring.series import Series, Window
from gridxfer.monitoring.sources.taperead import LogSource, TapeLogs
from gridxfer.monitoring.sources.tapelog import TapeSession, TapeWindow, aggregate

NAME = "tape"


def add_source_args(p: PluginParser, *, required: bool = True) -> None:
    """--cta/--dcache/--jsonl and the options shaping them (shared with the buffer check)."""
    g = p.add_argument_group("tape sources (repeatable, read incrementally)")
    g.add_argument("--cta", action="append", type=path_arg, default=[], metavar="LOG",
                   help="cta-taped log (key=\"value\" text or JSON lines); rotation into "
                        "old/ is followed")
    g.add_argument("--dcache", action="append", type=path_arg, default=[], metavar="BILLING",
                   help="dCache billing file, or the billing directory (billing-yyyy.MM.dd "
                        "under yyyy/MM, text or JSON): store records")
    g.add_argument("--jsonl", action="append", type=path_arg, default=[], metavar="FILE",
                   help="generic JSON-lines sessions (end, bytes, duration|rate_MBps, drive, "
                        "kind)")
    g.add_argument("--rate-basis", choices=cta.BASES, default="payload",
                   help="CTA rate: payload (default; on real cta-taped lines the same as "
                        "session), session (dataVolume/totalTime, mount to unmount), drive "
                        "(with headers) or transfer (dataVolume/transferTime, without mount "
                        "and positioning)")
    g.add_argument("--mount-types", type=mount_types_arg,
                   default=",".join(sorted(cta.ARCHIVE_KINDS)),
                   help="CTA mountType values that are writes (default: %(default)s; 'all')")
    g.add_argument("--min-volume", type=typed(parse_size, "size"), default=parse_size("1GB"),
                   metavar="SIZE", help="ignore CTA/JSONL sessions smaller than this (default "
                   "1GB); not applied to dCache store records (one file each)")
    g.add_argument("--log-tz", type=typed(zone_arg, "time zone"), metavar="ZONE",
                   help="zone of timestamps written without one (CTA text, syslog headers, "
                        "dCache billing dates), e.g. Europe/Zurich (default: the checker's)")
    g.add_argument("--state-file", type=state_file_arg, help="cookie with log positions and recent "
                   "sessions (default under $GRIDXFER_HOME/checks/)")
    g.add_argument("--no-state", action="store_true",
                   help="read the whole logs every time and remember nothing")
    g.add_argument("--at", type=timestamp_arg, help=argparse.SUPPRESS)


def mount_types_arg(text: str) -> str:
    """``all`` or a comma-separated list of CTA mountType names (ArchiveForUser, ...). An
    empty list or a name that cannot be one would count every session as a read: a silent
    0 MB/s."""
    names = [k.strip() for k in text.split(",") if k.strip()]
    if text.strip() == "all":
        return "all"
    bad = [k for k in names if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", k)]
    if not names or bad:
        raise argparse.ArgumentTypeError(
            f"expected 'all' or mountType names separated by commas (e.g. "
            f"{','.join(sorted(cta.ARCHIVE_KINDS))}), got {_show(text)}")
    return ",".join(names)


def sources(args: argparse.Namespace, now: float) -> list[LogSource]:
    kinds = None if args.mount_types.strip() == "all" else frozenset(
        k.strip() for k in args.mount_types.split(",") if k.strip())
    clock = LogClock(args.log_tz, now)
    cta_parse, dc_parse = cta.parser(args.rate_basis, kinds, clock), dcache.parser(clock)
    out = [LogSource(p, cta_parse, "cta") for p in args.cta]
    for p in args.dcache:
        files = dcache.billing_files(p, now, args.window, args.log_tz)
        if not files:
            raise ValueError(f"{p}: no billing-yyyy.MM.dd file for the window "
                             f"(looked in yyyy/MM/ and flat)")
        out += [LogSource(f, dc_parse, "dcache") for f in files]
    out += [LogSource(p, jsonl.parse, "jsonl") for p in args.jsonl]
    return out


def _future(series: Series[TapeSession], now: float, zone: str) -> str:
    ahead = [s.end - now for s in series.samples if s.end > now + FUTURE_TOLERANCE]
    if not ahead:
        return ""
    return (f"{len(ahead)} log record(s) up to {fmt_duration(max(ahead))} in the future, "
            f"read in {zone}: is the log written in another time zone? (--log-tz)")


def read_window(args: argparse.Namespace, kind: str
                ) -> tuple[TapeWindow, Series[TapeSession]]:
    """The tape window for a check's args, and the series it was summed from (unparsable
    lines, rotations not followed)."""
    now = args.at if args.at is not None else time.time()
    srcs = sources(args, now)
    if args.no_state:
        cookie = None
    elif args.state_file:
        cookie = args.state_file
    else:
        names = [*args.cta, *args.dcache, *args.jsonl]
        key = "\n".join(sorted(os.path.abspath(p) for p in names))
        cookie = bl.state_path(kind, hashlib.sha1(key.encode()).hexdigest()[:16])
    series = TapeLogs(tuple(srcs), cookie).series(Window(now, args.window))
    if (problem := _future(series, now, LogClock(args.log_tz).zone_name)):
        raise nagiosplugin.CheckError(problem)
    tw = aggregate(series.samples, now=now, window=args.window, min_volume=args.min_volume)
    return tw, series


def garbage_note(series: Series[TapeSession]) -> str:
    if not series.unparsable_total:
        return ""
    per = ", ".join(f"{fmt} {n}" for fmt, n in sorted(series.unparsable.items()))
    return f", {series.unparsable_total} unparsable line(s) ({per})"


@dataclass(frozen=True)
class TapeReading:
    window: float
    figures: TapeWindow
    series: Series[TapeSession]
    idle: bool                      # no session counted and --idle is not evaluate


class Tape(GxResource):
    """Collects: the tape logs' series for the window and its aggregate."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    def collect(self) -> Iterator[nagiosplugin.Metric]:
        a = self.args
        tw, series = read_window(a, NAME)
        idle = tw.sessions == 0 and a.idle != "evaluate"
        self.reading = TapeReading(a.window, tw, series, idle)
        if idle:
            yield nagiosplugin.Metric("write_MBps", 0, min=0, context="idle")
            return
        yield nagiosplugin.Metric("write_MBps", round(tw.rate / 1e6, 3), min=0, context="write")
        yield nagiosplugin.Metric("drives", tw.units, min=0, context="drives")
        yield nagiosplugin.Metric("drives_down", len(tw.down), min=0, context="info")
        yield nagiosplugin.Metric("per_drive_MBps", round(tw.per_unit_rate / 1e6, 3), min=0,
                                  context="info")
        yield nagiosplugin.Metric("volume_MBps", round(tw.volume_rate / 1e6, 3), min=0,
                                  context="info")
        yield nagiosplugin.Metric("sessions", tw.sessions, min=0, context="info")
        yield nagiosplugin.Metric("short_sessions", tw.filtered, min=0, context="info")
        yield nagiosplugin.Metric("failed_sessions", tw.failed, min=0, context="info")
        yield nagiosplugin.Metric("drives_failing", len(tw.failing), min=0, context="info")
        yield nagiosplugin.Metric("unparsable_lines", series.unparsable_total, min=0,
                                  context="info")
        if a.per_drive:
            for unit, rate in tw.per_unit.items():
                yield nagiosplugin.Metric(perf_label(f"drive_{unit}_MBps"),
                                          round(rate / 1e6, 3), min=0, context="info")


def _notes(r: TapeReading) -> str:
    tw = r.figures
    head = ""
    if tw.down:
        head += (f", {len(tw.down)} drive(s) down (killed or put down): "
                 f"{', '.join(tw.down)}")
    if tw.failing:
        head += (f", last session not successful on {', '.join(tw.failing)} "
                 f"(not down)")
    if tw.failed:
        head += f", {tw.failed} failed session(s)"
    if tw.reads:
        head += f", {tw.reads} read or label session(s) not counted"
    if tw.filtered:
        head += f", {tw.filtered} short session(s) ignored"
    head += garbage_note(r.series)
    for note in r.series.notes:
        head += f", {note}"
    return head


def describe(r: TapeReading) -> str:
    """The status line (the summary's part)."""
    if r.idle:
        return idle_line(r)
    tw = r.figures
    line = (f"{fmt_rate(tw.rate)} to tape from {tw.units} drive(s)"
            f" ({fmt_rate(tw.per_unit_rate)} per drive), {tw.sessions} "
            f"session(s), {fmt_bytes(tw.bytes)} in {fmt_duration(r.window)}" + _notes(r))
    return "[EMULATED tape] " + line if tw.emulated else line


def idle_line(r: TapeReading) -> str:
    return f"no tape sessions in the last {fmt_duration(r.window)}" + _notes(r)


def build_parser() -> PluginParser:
    p = PluginParser("check_gridxfer_tape", __doc__, thresholds="aggregate write MB/s")
    add_source_args(p)
    g = p.add_argument_group("window and thresholds")
    g.add_argument("-W", "--window", type=duration_arg, default=3600.0,
                   help="window (default 1h)")
    g.add_argument("--drives-warning", type=range_arg, metavar="RANGE",
                   help="active drives, e.g. 4:")
    g.add_argument("--drives-critical", type=range_arg, metavar="RANGE",
                   help="active drives, e.g. 2:")
    g.add_argument("--per-drive", action="store_true", help="perfdata per drive")
    g.add_argument("--idle", choices=("evaluate", "ok", "warning", "critical", "unknown"),
                   default="evaluate", help="state when no session finished in the window "
                   "(default: evaluate 0 MB/s against -w/-c)")
    return p


def check_sources(args: argparse.Namespace) -> None:
    if not (args.cta or args.dcache or args.jsonl):
        raise PluginUsage("give at least one source: --cta, --dcache or --jsonl")
    if args.no_state and args.state_file:
        raise PluginUsage("--no-state and --state-file exclude each other")


def build(args: argparse.Namespace) -> nagiosplugin.Check:
    check_sources(args)
    res = Tape(args)
    return GxCheck(res,
                   nagiosplugin.ScalarContext("write", args.warning, args.critical,
                                              fmt_metric="write {value} MB/s"),
                   nagiosplugin.ScalarContext("drives", args.drives_warning,
                                              args.drives_critical,
                                              fmt_metric="{value} active drive(s)"),
                   nagiosplugin.ScalarContext("info"),
                   IdleContext("idle", args.idle if args.idle != "evaluate" else "ok", idle_line),
                   LineSummary(res, describe), name=NAME, prom_file=args.prom_file)


def main(argv: list[str] | None = None) -> None:
    run_plugin(NAME, build_parser(), build, argv)
