"""check_gridxfer_throughput: transfer throughput over a window, from campaign journals.

Absolute floor with -w/-c (MB/s, e.g. ``-w 200: -c 100:``) and a drop against a
persisted baseline (EWMA and per-hour-of-day, ``--baseline-warning/--baseline-critical``
in % of baseline, e.g. ``70:``/``50:``). Journals are opened read-only.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import nagiosplugin

from gridxfer.units import fmt_duration, fmt_rate
from gridxfer.monitoring import baseline as bl
from gridxfer.monitoring.nagios import (GxCheck, GxResource, LineSummary, PluginParser, StateContext,
                      duration_arg, perf_label, range_arg, run_plugin)
from gridxfer.monitoring.sources.journal import journal_paths, window_throughput

NAME = "throughput"


class Throughput(GxResource):
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.headline = ""

    def collect(self):
        a = self.args
        now = a.at if a.at is not None else time.time()
        paths = journal_paths(a.campaign, a.journal)
        wt = window_throughput(paths, a.window, now=now, endpoint=a.endpoint, tier=a.tier)
        mbps = wt.rate / 1e6
        what = a.campaign or (a.journal.name if a.journal else f"{wt.journals} journal(s)")
        if a.endpoint:
            what += f" -> {a.endpoint}"
        head = f"{fmt_rate(wt.rate)} over {fmt_duration(a.window)} ({what}"
        head += f", {wt.attempts} transfers, {wt.active} active"
        head += f", {wt.failed} failed)" if wt.failed else ")"
        if wt.idle and a.idle != "evaluate":
            self.headline = f"no transfers in the last {fmt_duration(a.window)} ({what})"
            yield nagiosplugin.Metric(self.headline, {"ok": 0, "warning": 1, "critical": 2,
                                                      "unknown": 3}[a.idle], context="idle")
            yield nagiosplugin.Metric("throughput_MBps", round(mbps, 3), min=0,
                                      context="info")
            return
        yield nagiosplugin.Metric("throughput_MBps", round(mbps, 3), min=0, context="floor")
        yield nagiosplugin.Metric("transfers", wt.attempts, min=0, context="info")
        yield nagiosplugin.Metric("active", wt.active, min=0, context="info")
        yield nagiosplugin.Metric("failed", wt.failed, min=0, context="info")
        if a.per_endpoint:
            for ep, rate in wt.endpoint_rates().items():
                yield nagiosplugin.Metric(perf_label(f"ep_{ep}_MBps"), round(rate / 1e6, 3),
                                          min=0, context="info")
        if a.baseline != "none":
            head += self._baseline(now, wt.rate, wt.idle)
        self.headline = head

    def _baseline(self, now: float, rate: float, idle: bool):
        a = self.args
        key = a.campaign or (str(a.journal) if a.journal else "all")
        path = a.state_file or bl.state_path(NAME, f"{key}-{a.endpoint or ''}-{a.tier or ''}")
        base, note = bl.load(path)
        ref = base.reference(now, a.baseline, a.baseline_min_samples)
        text = f", {note}" if note else ""
        if ref:
            pct = 100.0 * rate / ref
            self.extra = [nagiosplugin.Metric("baseline_pct", round(pct, 1), min=0,
                                              context="baseline"),
                          nagiosplugin.Metric("baseline_MBps", round(ref / 1e6, 3), min=0,
                                              context="info")]
            text += f", {pct:.0f}% of {a.baseline} baseline {fmt_rate(ref)}"
        else:
            self.extra = []
            text += (f", baseline learning {base.samples(now, a.baseline)}"
                     f"/{a.baseline_min_samples}")
        if not idle and not a.no_learn:
            bl.save(path, base.learn(now, rate, alpha=a.baseline_alpha))
        return text

    def probe(self):
        self.extra = []
        metrics = super().probe()
        return metrics + self.extra


def build_parser() -> PluginParser:
    p = PluginParser("check_gridxfer_throughput", __doc__, thresholds="throughput in MB/s",
                     default_warning=None, default_critical=None)
    src = p.add_argument_group("source")
    src.add_argument("-C", "--campaign", help="campaign name (default: every journal)")
    src.add_argument("-J", "--journal", type=Path, help="journal file (.sqlite)")
    src.add_argument("-W", "--window", type=duration_arg, default=600.0,
                     help="window, e.g. 10m (default 10m)")
    src.add_argument("-E", "--endpoint", help="only this destination endpoint (glob)")
    src.add_argument("-T", "--tier", help="only this destination tier")
    src.add_argument("--per-endpoint", action="store_true", help="perfdata per endpoint")
    src.add_argument("--idle", choices=("evaluate", "ok", "warning", "critical", "unknown"),
                     default="evaluate",
                     help="state when nothing was transferred in the window (default: "
                          "evaluate 0 MB/s against -w/-c)")
    src.add_argument("--at", type=float, help=argparse.SUPPRESS)   # replay: evaluate at time
    b = p.add_argument_group("baseline")
    b.add_argument("--baseline", choices=("auto", "ewma", "hourly", "none"), default="auto",
                   help="auto: per-hour-of-day when learnt, else EWMA (default auto)")
    b.add_argument("--baseline-warning", type=range_arg, default=None, metavar="RANGE",
                   help="%% of baseline, e.g. 70:")
    b.add_argument("--baseline-critical", type=range_arg, default=None, metavar="RANGE",
                   help="%% of baseline, e.g. 50:")
    b.add_argument("--baseline-alpha", type=float, default=0.1, help="EWMA weight (0.1)")
    b.add_argument("--baseline-min-samples", type=int, default=5,
                   help="samples before the baseline is used (5)")
    b.add_argument("--no-learn", action="store_true", help="do not update the baseline")
    b.add_argument("--state-file", type=Path, help="baseline state (default under "
                   "$GRIDXFER_HOME/checks/)")
    return p


def build(args: argparse.Namespace) -> nagiosplugin.Check:
    from gridxfer.monitoring.nagios import PluginUsage
    if args.campaign and args.journal:
        raise PluginUsage("use --campaign or --journal, not both")
    if not 0 < args.baseline_alpha <= 1:
        raise PluginUsage("--baseline-alpha must be in (0, 1]")
    if args.baseline_min_samples < 1:
        raise PluginUsage("--baseline-min-samples must be >= 1")
    res = Throughput(args)
    return GxCheck(res,
                   nagiosplugin.ScalarContext("floor", args.warning, args.critical,
                                              fmt_metric="throughput {value} MB/s"),
                   nagiosplugin.ScalarContext("baseline", args.baseline_warning,
                                              args.baseline_critical,
                                              fmt_metric="{value}% of baseline"),
                   nagiosplugin.ScalarContext("info"), StateContext("idle"),
                   LineSummary(res), name=NAME, prom_file=args.prom_file)


def main(argv: list[str] | None = None) -> None:
    run_plugin(NAME, build_parser(), build, argv)
