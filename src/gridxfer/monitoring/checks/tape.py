"""check_gridxfer_tape: write-to-tape throughput from CTA, dCache billing or JSON-lines logs.

Logs are read incrementally (nagiosplugin LogTail + Cookie, rotation handled); the
sessions that finished in the window give the aggregate rate (sum over drives of
bytes / busy time), the active drives and the per-drive rate. Sessions smaller than
--min-volume are left out so that short sessions do not distort the rate.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import time
from pathlib import Path

import nagiosplugin

from ...units import fmt_bytes, fmt_duration, fmt_rate, parse_size
from .. import baseline as bl
from ..nagios import (GxCheck, GxResource, LineSummary, PluginParser, PluginUsage,
                      StateContext, duration_arg, perf_label, range_arg, run_plugin, typed)
from ..sources import cta, dcache, jsonl
from ..sources.tapelog import Parser, TapeWindow, aggregate, read_sessions

NAME = "tape"


def add_source_args(p: PluginParser, *, required: bool = True) -> None:
    """--cta/--dcache/--jsonl and the options shaping them (shared with the buffer check)."""
    g = p.add_argument_group("tape sources (repeatable, read incrementally)")
    g.add_argument("--cta", action="append", type=Path, default=[], metavar="LOG",
                   help="cta-taped log (key=\"value\" text or JSON lines)")
    g.add_argument("--dcache", action="append", type=Path, default=[], metavar="BILLING",
                   help="dCache billing file (store records)")
    g.add_argument("--jsonl", action="append", type=Path, default=[], metavar="FILE",
                   help="generic JSON-lines sessions (end, bytes, duration|rate_MBps, drive)")
    g.add_argument("--rate-basis", choices=cta.BASES, default="payload",
                   help="CTA rate: payload (default), drive (with headers) or session "
                        "(dataVolume/totalTime, with mounts)")
    g.add_argument("--mount-types", default=",".join(sorted(cta.ARCHIVE_KINDS)),
                   help="CTA mountType values counted (default: %(default)s; 'all')")
    g.add_argument("--min-volume", type=typed(parse_size, "size"), default=parse_size("1GB"),
                   metavar="SIZE", help="ignore sessions smaller than this (default 1GB)")
    g.add_argument("--state-file", type=Path, help="cookie with log positions and recent "
                   "sessions (default under $GRIDXFER_HOME/checks/)")
    g.add_argument("--no-state", action="store_true",
                   help="read the whole logs every time and remember nothing")
    g.add_argument("--at", type=float, help=argparse.SUPPRESS)


def source_parsers(args: argparse.Namespace) -> list[tuple[Path, Parser]]:
    kinds = None if args.mount_types.strip() == "all" else frozenset(
        k.strip() for k in args.mount_types.split(",") if k.strip())
    cta_parse = cta.parser(args.rate_basis, kinds)
    out: list[tuple[Path, Parser]] = [(p, cta_parse) for p in args.cta]
    out += [(p, dcache.parse) for p in args.dcache]
    out += [(p, jsonl.parse) for p in args.jsonl]
    return out


def read_window(args: argparse.Namespace, kind: str) -> tuple[TapeWindow, int]:
    """The tape window for a check's args, and the number of garbage lines seen."""
    now = args.at if args.at is not None else time.time()
    sources = source_parsers(args)
    if args.no_state:
        cookie = None
    elif args.state_file:
        cookie = args.state_file
    else:
        key = "\n".join(sorted(os.path.abspath(p) for p, _ in sources))
        cookie = bl.state_path(kind, hashlib.sha1(key.encode()).hexdigest()[:16])
    sessions, garbage = read_sessions(sources, cookie, keep_after=now - 2 * args.window)
    return aggregate(sessions, now=now, window=args.window, min_volume=args.min_volume), garbage


class Tape(GxResource):
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.headline = ""

    def collect(self):
        a = self.args
        tw, garbage = read_window(a, NAME)
        head = (f"{fmt_rate(tw.rate)} to tape from {tw.units} drive(s)"
                f" ({fmt_rate(tw.per_unit_rate)} per drive), {tw.sessions} session(s), "
                f"{fmt_bytes(tw.bytes)} in {fmt_duration(a.window)}")
        if tw.emulated:
            head = "[EMULATED tape] " + head
        if tw.down:
            head += f", {len(tw.down)} drive(s) down (last session failed): {', '.join(tw.down)}"
        if tw.filtered:
            head += f", {tw.filtered} short session(s) ignored"
        if garbage:
            head += f", {garbage} unparsable line(s)"
        self.headline = head
        if tw.sessions == 0 and a.idle != "evaluate":
            self.headline = f"no tape sessions in the last {fmt_duration(a.window)}"
            yield nagiosplugin.Metric(self.headline, {"ok": 0, "warning": 1, "critical": 2,
                                                      "unknown": 3}[a.idle], context="idle")
            yield nagiosplugin.Metric("write_MBps", 0, min=0, context="info")
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
        if a.per_drive:
            for unit, rate in tw.per_unit.items():
                yield nagiosplugin.Metric(perf_label(f"drive_{unit}_MBps"),
                                          round(rate / 1e6, 3), min=0, context="info")


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
                   nagiosplugin.ScalarContext("info"), StateContext("idle"),
                   LineSummary(res), name=NAME, prom_file=args.prom_file)


def main(argv: list[str] | None = None) -> None:
    run_plugin(NAME, build_parser(), build, argv)
