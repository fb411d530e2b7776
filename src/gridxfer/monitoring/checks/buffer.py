"""check_gridxfer_buffer: disk-buffer fill and time-to-full from inflow and outflow.

Fill comes from statvfs of --path (the filesystem), from the bytes under --path against
--capacity (a buffer directory or pool), or from --used/--capacity numbers. Inflow is
the transfer rate into the buffer from campaign journals (or --inflow); outflow is the
write-to-tape rate from the tape sources, or from a campaign whose tier is tape-backed
(--outflow-campaign: the bytes its journal saw reach tape in the window), or --outflow.
With --tier both rates count that tier only: a campaign's inflow to its tape-backed tier
against that tier's tape outflow. With inflow above outflow the
buffer fills in free / (inflow - outflow) seconds: --ttf-critical pages *before* it is
full, whatever the fill percentage.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nagiosplugin

from gridxfer.units import (MAX_DURATION, fmt_bytes, fmt_duration, fmt_rate, parse_byterate,
                            parse_size)
from gridxfer.monitoring.nagios import (GxCheck, GxResource, LineSummary, PluginParser,
                                        PluginUsage, run_plugin)
from gridxfer.monitoring.pluginargs import duration_arg, path_arg, typed
from gridxfer.monitoring.sources.journal import journal_paths, window_throughput, window_to_tape
from gridxfer.monitoring.checks.tape import add_source_args, read_window

NAME = "buffer"


def usage(args: argparse.Namespace) -> tuple[float, float]:
    """(used, capacity) in bytes."""
    if args.used is not None:
        return float(args.used), float(args.capacity)
    path: Path = args.path
    if args.capacity is not None:
        used = 0
        for root, _dirs, files in os.walk(path, onerror=_raise):
            for name in files:
                with contextlib.suppress(FileNotFoundError):   # drained by tape meanwhile
                    used += os.lstat(os.path.join(root, name)).st_size
        return float(used), float(args.capacity)
    st = os.statvfs(path)
    capacity = st.f_blocks * st.f_frsize
    free = st.f_bavail * st.f_frsize
    return float(capacity - free), float(capacity)


def byterate(text: str) -> float:
    """``200MB/s``, or a plain number of bytes/s."""
    try:
        value = float(text)
    except ValueError:
        value = parse_byterate(text)
    if not 0 <= value < 1e15:
        raise ValueError(f"rate out of range: {text!r}")
    return value


def _raise(exc: OSError) -> None:
    raise exc


class TimeToFull(nagiosplugin.Context):
    """OK while time-to-full >= warning. A buffer that is not filling has no time-to-full:
    the metric is left out (perfdata and Prometheus), and the line says "not filling"."""

    def __init__(self, name: str, warning: float, critical: float) -> None:
        super().__init__(name)
        self.warning, self.critical = warning, critical

    def evaluate(self, metric, resource):
        v = metric.value
        if v < self.critical:
            return nagiosplugin.Result(
                nagiosplugin.Critical,
                f"full in {fmt_duration(v)} (< {fmt_duration(self.critical)})", None)
        if v < self.warning:
            return nagiosplugin.Result(
                nagiosplugin.Warn,
                f"full in {fmt_duration(v)} (< {fmt_duration(self.warning)})", None)
        return nagiosplugin.Result(nagiosplugin.Ok, None, metric)

    def performance(self, metric, resource):
        return nagiosplugin.Performance(metric.name, round(metric.value, 1), "",
                                        f"{self.warning:g}:", f"{self.critical:g}:", 0)


@dataclass(frozen=True)
class BufferReading:
    where: str
    used: float
    capacity: float
    rate_in: float                  # bytes/s
    rate_out: float
    emulated: bool                  # the outflow came from the EMULATED tape

    @property
    def fill(self) -> float:
        return 100.0 * self.used / self.capacity

    @property
    def net(self) -> float:
        return self.rate_in - self.rate_out

    @property
    def time_to_full(self) -> float:
        """Seconds until full, at most :data:`MAX_DURATION` (10 years: an inflow a hair
        above the outflow would give 1e300 s, printed with an exponent, which perfdata
        values may not have)."""
        free = max(0.0, self.capacity - self.used)
        return min(free / self.net, MAX_DURATION) if self.net > 0 else math.inf


class Buffer(GxResource):
    """Collects: the buffer's usage, the journal source's inflow and the tape outflow."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    def inflow(self, now: float) -> float:
        a = self.args
        if a.inflow is not None:
            return float(a.inflow)
        paths = journal_paths(a.inflow_campaign, a.inflow_journal)
        return window_throughput(paths, a.window, now=now, endpoint=a.inflow_endpoint,
                                 tier=a.tier).rate

    def outflow(self, now: float) -> tuple[float, bool]:
        """(bytes/s, whether it came from the EMULATED tape)."""
        a = self.args
        if a.outflow is not None:
            return float(a.outflow), False
        if a.outflow_campaign is not None:
            return window_to_tape(journal_paths(a.outflow_campaign), a.window, now=now,
                                  tier=a.tier), False
        tw, _series = read_window(a, NAME)
        return (tw.rate if a.outflow_basis == "drives" else tw.volume_rate), tw.emulated

    def collect(self) -> Iterator[nagiosplugin.Metric]:
        a = self.args
        now = a.at if a.at is not None else time.time()
        used, capacity = usage(a)
        if capacity <= 0:
            raise ValueError(f"buffer capacity is {capacity:.0f} bytes")
        rate_in = self.inflow(now)
        rate_out, emulated = self.outflow(now)
        r = BufferReading(str(a.path) if a.path else "buffer", used, capacity, rate_in,
                          rate_out, emulated)
        self.reading = r
        yield nagiosplugin.Metric("fill_pct", round(r.fill, 2), min=0, max=100, context="fill")
        if r.net > 0:       # not filling: no time-to-full at all (no sentinel value)
            yield nagiosplugin.Metric("time_to_full_s", r.time_to_full, context="ttf")
        yield nagiosplugin.Metric("inflow_MBps", round(rate_in / 1e6, 3), min=0, context="info")
        yield nagiosplugin.Metric("outflow_MBps", round(rate_out / 1e6, 3), min=0,
                                  context="info")
        yield nagiosplugin.Metric("used_GB", round(used / 1e9, 3), min=0,
                                  max=round(capacity / 1e9, 3), context="info")


def describe(r: BufferReading) -> str:
    """The status line (the summary's part)."""
    where = f"[EMULATED tape] {r.where}" if r.emulated else r.where
    head = (f"{where} {r.fill:.1f}% full ({fmt_bytes(r.used)} of {fmt_bytes(r.capacity)}), "
            f"in {fmt_rate(r.rate_in)}, out {fmt_rate(r.rate_out)}")
    if r.net <= 0:
        return head + ", not filling"
    if r.time_to_full >= MAX_DURATION:
        return head + ", full in more than 10 years"
    return head + f", full in {fmt_duration(r.time_to_full)}"


def build_parser() -> PluginParser:
    p = PluginParser("check_gridxfer_buffer", __doc__, thresholds="fill %%",
                     default_warning="80", default_critical="90")
    g = p.add_argument_group("buffer")
    g.add_argument("-p", "--path", type=path_arg, help="buffer directory / filesystem")
    g.add_argument("--capacity", type=typed(parse_size, "size"), metavar="SIZE",
                   help="buffer size: with --path, fill = bytes under path / SIZE")
    g.add_argument("--used", type=typed(parse_size, "size"), metavar="SIZE",
                   help="bytes in the buffer (with --capacity, instead of --path)")
    g.add_argument("-W", "--window", type=duration_arg, default=900.0,
                   help="window for the rates (default 15m)")
    g.add_argument("--ttf-warning", type=duration_arg, default=4 * 3600.0, metavar="DURATION",
                   help="warn when full in less than this (default 4h)")
    g.add_argument("--ttf-critical", type=duration_arg, default=3600.0, metavar="DURATION",
                   help="critical when full in less than this (default 1h)")
    f = p.add_argument_group("inflow (one of)")
    f.add_argument("--inflow", type=typed(byterate, "rate"), metavar="RATE",
                   help="fixed inflow, e.g. 200MB/s")
    f.add_argument("--inflow-campaign", metavar="NAME", help="campaign journal")
    f.add_argument("--inflow-journal", type=path_arg, metavar="PATH", help="journal file")
    f.add_argument("--inflow-endpoint", metavar="GLOB", help="only transfers to this endpoint")
    f.add_argument("--tier", metavar="TIER",
                   help="campaign rates of this tier only (inflow, and --outflow-campaign)")
    o = p.add_argument_group("outflow: a fixed --outflow or the tape sources below")
    o.add_argument("--outflow", type=typed(byterate, "rate"), metavar="RATE",
                   help="fixed outflow, e.g. 60MB/s")
    o.add_argument("--outflow-campaign", metavar="NAME",
                   help="the tape outflow a campaign's journal saw (files of its tape-backed "
                        "tiers on tape in the window)")
    o.add_argument("--outflow-basis", choices=("volume", "drives"), default="volume",
                   help="volume: bytes written in the window (default); drives: sum of "
                        "per-drive rates")
    add_source_args(p)
    return p


def build(args: argparse.Namespace) -> nagiosplugin.Check:
    if args.used is not None and args.capacity is None:
        raise PluginUsage("--used needs --capacity")
    if args.used is None and args.path is None:
        raise PluginUsage("give --path (or --used with --capacity)")
    if args.used is not None and args.used > args.capacity:
        raise PluginUsage(f"--used {args.used} B is more than --capacity {args.capacity} B")
    if args.ttf_critical > args.ttf_warning:
        raise PluginUsage("--ttf-critical must not exceed --ttf-warning")
    has_tape = args.cta or args.dcache or args.jsonl
    outflows = sum(1 for given in (args.outflow is not None, bool(has_tape),
                                   args.outflow_campaign is not None) if given)
    if not outflows:
        raise PluginUsage("give --outflow, --outflow-campaign or a tape source "
                          "(--cta/--dcache/--jsonl)")
    if outflows > 1:
        raise PluginUsage("--outflow, --outflow-campaign and tape sources exclude each other")
    res = Buffer(args)
    return GxCheck(res,
                   nagiosplugin.ScalarContext("fill", args.warning, args.critical,
                                              fmt_metric="{value}% full"),
                   TimeToFull("ttf", args.ttf_warning, args.ttf_critical),
                   nagiosplugin.ScalarContext("info"), LineSummary(res, describe), name=NAME,
                   prom_file=args.prom_file)


def main(argv: list[str] | None = None) -> None:
    run_plugin(NAME, build_parser(), build, argv)
