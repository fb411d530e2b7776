"""check_gridxfer_link: an iperf3 throughput floor between this host and an iperf3 server.

Runs ``iperf3 -J -c HOST`` (an ``iperf3 -s`` must listen there) and checks the received
rate in Mbit/s against -w/-c, e.g. ``-w 5000: -c 1000:``. -t must leave room for the
test: the check refuses a --duration that cannot finish within the timeout.
"""
from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from dataclasses import dataclass

import nagiosplugin

from gridxfer.monitoring.nagios import (GxCheck, GxResource, LineSummary, PluginParser,
                                        PluginUsage, run_plugin)
from gridxfer.monitoring.pluginargs import duration_arg, range_arg
from gridxfer.monitoring.series import Point, Series, Window
from gridxfer.monitoring.sources.iperf import IperfSource
from gridxfer.limits import IPERF3_MAX_DURATION, IPERF3_MAX_STREAMS

NAME = "link"


class Link(GxResource):
    """Collects: one run of the iperf3 source; the link check's reading is its series."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    def collect(self) -> Iterator[nagiosplugin.Metric]:
        a = self.args
        budget = (a.timeout or 3600) - 1
        source = IperfSource(a.host, port=a.port, streams=a.parallel, reverse=a.reverse,
                             connect_timeout=min(3.0, a.duration), timeout=budget,
                             iperf3=a.iperf3)
        series = source.series(Window(time.time(), a.duration))
        self.reading = LinkReading(a.host, a.port, a.reverse, series)
        yield nagiosplugin.Metric("link_Mbps", round(series.totals["received_bps"] / 1e6, 2),
                                  min=0, context="link")
        if "retransmits" in series.totals:
            yield nagiosplugin.Metric("retransmits", int(series.totals["retransmits"]), min=0,
                                      context="retr")


@dataclass(frozen=True)
class LinkReading:
    host: str
    port: int
    reverse: bool
    series: Series[Point]


def describe(r: LinkReading) -> str:
    """The status line (the summary's part)."""
    t = r.series.totals
    direction = "from" if r.reverse else "to"
    retr = f", {int(t['retransmits'])} retransmits)" if "retransmits" in t else ")"
    return (f"{t['received_bps'] / 1e6:.1f} Mbit/s {direction} {r.host}:{r.port} "
            f"({int(t['streams'])} stream(s), {t['seconds']:.1f}s{retr}")


def build_parser() -> PluginParser:
    p = PluginParser("check_gridxfer_link", __doc__, thresholds="received Mbit/s")
    g = p.add_argument_group("iperf3")
    g.add_argument("-H", "--host", required=True, help="iperf3 server")
    g.add_argument("-p", "--port", type=int, default=5201, help="server port (5201)")
    g.add_argument("-d", "--duration", type=duration_arg, default=5.0,
                   help="test length (default 5s)")
    g.add_argument("-P", "--parallel", type=int, default=1, help="parallel streams (1)")
    g.add_argument("-R", "--reverse", action="store_true", help="server sends (download)")
    g.add_argument("--retransmits-warning", type=range_arg, metavar="RANGE")
    g.add_argument("--retransmits-critical", type=range_arg, metavar="RANGE")
    g.add_argument("--iperf3", default="iperf3", help="iperf3 executable")
    return p


def build(args: argparse.Namespace) -> nagiosplugin.Check:
    host = args.host.strip()
    if not host or host.startswith("-") or any(c in host for c in "@/ \t\n"):
        # a name or an address: iperf3 takes no user (a password would be in its argv)
        raise PluginUsage(f"-H {args.host!r}: expected a host name or an address")
    if not 0 < args.port < 65536:
        raise PluginUsage(f"bad port {args.port}")
    if not 1 <= args.parallel <= IPERF3_MAX_STREAMS:
        raise PluginUsage(f"--parallel must be 1..{IPERF3_MAX_STREAMS}")
    too_long = IPERF3_MAX_DURATION.above(args.duration, f"{args.duration:g}s")
    if too_long:
        raise PluginUsage(f"--duration: {too_long}")
    if args.timeout and args.duration + 4 > args.timeout:
        raise PluginUsage(f"--duration {args.duration:g}s does not fit in -t {args.timeout}s "
                          "(needs duration + 4s)")
    res = Link(args)
    return GxCheck(res,
                   nagiosplugin.ScalarContext("link", args.warning, args.critical,
                                              fmt_metric="{value} Mbit/s"),
                   nagiosplugin.ScalarContext("retr", args.retransmits_warning,
                                              args.retransmits_critical,
                                              fmt_metric="{value} retransmits"),
                   LineSummary(res, describe), name=NAME, prom_file=args.prom_file)


def main(argv: list[str] | None = None) -> None:
    run_plugin(NAME, build_parser(), build, argv)
