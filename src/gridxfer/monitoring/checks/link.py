"""check_gridxfer_link: an iperf3 throughput floor between this host and an iperf3 server.

Runs ``iperf3 -J -c HOST`` (an ``iperf3 -s`` must listen there) and checks the received
rate in Mbit/s against -w/-c, e.g. ``-w 5000: -c 1000:``. -t must leave room for the
test: the check refuses a --duration that cannot finish within the timeout. When iperf3
reports that it could not test (no server, refused, unknown host) the link is CRITICAL:
the guidelines ("Plugin Return Codes") keep UNKNOWN for bad arguments and the plugin's own
failures, not for name resolution errors or refused connections. iperf3 is run by its
full path (guidelines, "Don't execute system commands without specifying their full
path"): found in /usr/bin, /usr/local/bin or /bin, or given with --iperf3.
"""
from __future__ import annotations

import argparse
import ipaddress
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass

import nagiosplugin

from gridxfer.monitoring.nagios import (GxCheck, GxResource, LineSummary, PluginParser,
                                        PluginUsage, run_plugin)
from gridxfer.monitoring.pluginargs import duration_arg, range_arg
from gridxfer.monitoring.series import Point, Series, Window
from gridxfer.monitoring.sources.iperf import IperfSource, IperfUnreachable, hostport
from gridxfer.monitoring.plugintext import one_line
from gridxfer.limits import IPERF3_MAX_DURATION, IPERF3_MAX_STREAMS

NAME = "link"
TRUSTED_DIRS = ("/usr/bin", "/usr/local/bin", "/bin")
_HOSTNAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                       r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?", re.ASCII)


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
        try:
            series = source.series(Window(time.time(), a.duration))
        except IperfUnreachable as exc:
            self.reading = LinkDown(one_line(exc))
            yield nagiosplugin.Metric("unreachable", self.reading.why, context="unreachable")
            return
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


@dataclass(frozen=True)
class LinkDown:
    why: str                        # iperf3's reason, on one line


class Unreachable(nagiosplugin.Context):
    """iperf3 could not test the link: CRITICAL, without perfdata (nothing was measured)."""

    def evaluate(self, metric: nagiosplugin.Metric, resource: object) -> nagiosplugin.Result:
        return nagiosplugin.Result(nagiosplugin.Critical, str(metric.value), metric)


def describe(r: LinkReading | LinkDown) -> str:
    """The status line (the summary's part)."""
    if isinstance(r, LinkDown):
        return r.why
    t = r.series.totals
    direction = "from" if r.reverse else "to"
    retr = f", {int(t['retransmits'])} retransmits)" if "retransmits" in t else ")"
    return (f"{t['received_bps'] / 1e6:.1f} Mbit/s {direction} {hostport(r.host, r.port)} "
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
    g.add_argument("--iperf3", metavar="PATH",
                   help="full path of iperf3 (default: found in " + ", ".join(TRUSTED_DIRS) + ")")
    return p


def host_ok(host: str) -> bool:
    """A DNS name or an IP address (iperf3 takes no user: a password would be in its argv)."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return bool(_HOSTNAME.fullmatch(host))


def iperf3_path(given: str | None) -> str:
    if given is None:
        found = shutil.which("iperf3", path=os.pathsep.join(TRUSTED_DIRS))
        if found is None:
            raise PluginUsage(f"iperf3 not found in {', '.join(TRUSTED_DIRS)} (give --iperf3 "
                              "PATH)")
        return found
    if not os.path.isabs(given) or not os.path.isfile(given) or not os.access(given, os.X_OK):
        raise PluginUsage(f"--iperf3 {given!r}: expected the full path of an executable file")
    return given


def build(args: argparse.Namespace) -> nagiosplugin.Check:
    if not host_ok(args.host):
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
    args.iperf3 = iperf3_path(args.iperf3)
    res = Link(args)
    return GxCheck(res, Unreachable("unreachable"),
                   nagiosplugin.ScalarContext("link", args.warning, args.critical,
                                              fmt_metric="{value} Mbit/s"),
                   nagiosplugin.ScalarContext("retr", args.retransmits_warning,
                                              args.retransmits_critical,
                                              fmt_metric="{value} retransmits"),
                   LineSummary(res, describe), name=NAME, prom_file=args.prom_file)


def main(argv: list[str] | None = None) -> None:
    run_plugin(NAME, build_parser(), build, argv)
