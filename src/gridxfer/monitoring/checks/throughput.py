"""check_gridxfer_throughput: transfer throughput over a window, from campaign journals.

Absolute floor with -w/-c (MB/s, e.g. ``-w 200: -c 100:``) and a drop against a
persisted baseline (EWMA and per-hour-of-day, ``--baseline-warning/--baseline-critical``
in % of baseline, e.g. ``70:``/``50:``). Journals are opened read-only.
"""
from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nagiosplugin

from gridxfer.units import fmt_duration, fmt_rate
from gridxfer.monitoring import baseline as bl
from gridxfer.monitoring.nagios import (GxCheck, GxResource, IdleContext, LineSummary,
                                        PluginParser, PluginUsage, run_plugin)
from gridxfer.monitoring.pluginargs import (duration_arg, path_arg, range_arg, state_file_arg,
                                            timestamp_arg)
from gridxfer.monitoring.plugintext import perf_label
from gridxfer.monitoring.series import Window
from gridxfer.monitoring.sources.journal import (JournalSource, WindowThroughput,
                                                 journal_paths, throughput)

NAME = "throughput"


@dataclass(frozen=True)
class BaselineView:
    """What the stored baseline said at collection time, and what to save afterwards."""

    mode: str
    reference: float | None         # bytes/s, None while learning
    samples: int
    min_samples: int
    note: str | None                # the state was reset (damaged file)
    path: Path
    learnt: bl.Baseline | None      # to save after evaluation (None: nothing to learn)


@dataclass(frozen=True)
class ThroughputReading:
    window: float
    what: str
    figures: WindowThroughput
    idle: bool                      # nothing in the window and --idle is not evaluate
    baseline: BaselineView | None


class Throughput(GxResource):
    """Collects: the journal source's series for the window, and the stored baseline."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    def collect(self) -> Iterator[nagiosplugin.Metric]:
        a = self.args
        now = a.at if a.at is not None else time.time()
        source = JournalSource(tuple(journal_paths(a.campaign, a.journal)), a.endpoint, a.tier)
        wt = throughput(source.series(Window(now, a.window)))
        mbps = wt.rate / 1e6
        what = a.campaign or (a.journal.name if a.journal else f"{wt.journals} journal(s)")
        if a.endpoint:
            what += f" -> {a.endpoint}"
        if wt.idle and a.idle != "evaluate":
            self.reading = ThroughputReading(a.window, what, wt, True, None)
            yield nagiosplugin.Metric("throughput_MBps", round(mbps, 3), min=0, context="idle")
            return
        view = self._baseline(now, wt) if a.baseline != "none" else None
        self.reading = ThroughputReading(a.window, what, wt, False, view)
        yield nagiosplugin.Metric("throughput_MBps", round(mbps, 3), min=0, context="floor")
        yield nagiosplugin.Metric("transfers", wt.attempts, min=0, context="info")
        yield nagiosplugin.Metric("active", wt.active, min=0, context="info")
        yield nagiosplugin.Metric("failed", wt.failed, min=0, context="info")
        if a.per_endpoint:
            for ep, rate in wt.endpoint_rates().items():
                yield nagiosplugin.Metric(perf_label(f"ep_{ep}_MBps"), round(rate / 1e6, 3),
                                          min=0, context="info")
        if view and view.reference:
            yield nagiosplugin.Metric("baseline_pct", round(100.0 * wt.rate / view.reference, 1),
                                      min=0, context="baseline")
            yield nagiosplugin.Metric("baseline_MBps", round(view.reference / 1e6, 3), min=0,
                                      context="info")

    def _baseline(self, now: float, wt: WindowThroughput) -> BaselineView:
        a = self.args
        key = a.campaign or (str(a.journal) if a.journal else "all")
        path = a.state_file or bl.state_path(NAME, f"{key}-{a.endpoint or ''}-{a.tier or ''}")
        base, note = bl.load(path)
        learnt = None
        if not wt.idle and not a.no_learn:
            learnt = base.learn(now, wt.rate, alpha=a.baseline_alpha)
        return BaselineView(a.baseline, base.reference(now, a.baseline, a.baseline_min_samples),
                            base.samples(now, a.baseline), a.baseline_min_samples, note, path,
                            learnt)

    def settle(self) -> None:
        """The baseline learns this run's rate once the run has been judged."""
        view = self.reading.baseline
        if view is not None and view.learnt is not None:
            bl.save(view.path, view.learnt)


def describe(r: ThroughputReading) -> str:
    """The status line (the summary's part)."""
    if r.idle:
        return idle_line(r)
    wt = r.figures
    head = f"{fmt_rate(wt.rate)} over {fmt_duration(r.window)} ({r.what}"
    head += f", {wt.attempts} transfers, {wt.active} active"
    head += f", {wt.failed} failed)" if wt.failed else ")"
    view = r.baseline
    if view is not None:
        head += f", {view.note}" if view.note else ""
        if view.reference:
            pct = 100.0 * wt.rate / view.reference
            head += f", {pct:.0f}% of {view.mode} baseline {fmt_rate(view.reference)}"
        else:
            head += f", baseline learning {view.samples}/{view.min_samples}"
    return head


def idle_line(r: ThroughputReading) -> str:
    return f"no transfers in the last {fmt_duration(r.window)} ({r.what})"


def build_parser() -> PluginParser:
    p = PluginParser("check_gridxfer_throughput", __doc__, thresholds="throughput in MB/s",
                     default_warning=None, default_critical=None)
    src = p.add_argument_group("source")
    src.add_argument("-C", "--campaign", help="campaign name (default: every journal)")
    src.add_argument("-J", "--journal", type=path_arg, help="journal file (.sqlite)")
    src.add_argument("-W", "--window", type=duration_arg, default=600.0,
                     help="window, e.g. 10m (default 10m)")
    src.add_argument("-E", "--endpoint", help="only this destination endpoint (glob)")
    src.add_argument("-T", "--tier", help="only this destination tier")
    src.add_argument("--per-endpoint", action="store_true", help="perfdata per endpoint")
    src.add_argument("--idle", choices=("evaluate", "ok", "warning", "critical", "unknown"),
                     default="evaluate",
                     help="state when nothing was transferred in the window (default: "
                          "evaluate 0 MB/s against -w/-c)")
    src.add_argument("--at", type=timestamp_arg, help=argparse.SUPPRESS)   # replay at a time
    b = p.add_argument_group("baseline")
    b.add_argument("--baseline", choices=("auto", "ewma", "hourly", "none"), default="auto",
                   help="auto: per-hour-of-day when learnt, else EWMA (default auto)")
    b.add_argument("--baseline-warning", type=range_arg, default=None, metavar="RANGE",
                   help="%% of baseline, e.g. 70:")
    b.add_argument("--baseline-critical", type=range_arg, default=None, metavar="RANGE",
                   help="%% of baseline, e.g. 50:")
    b.add_argument("--baseline-alpha", type=float, default=0.1, help="EWMA weight (0.1)")
    b.add_argument("--baseline-min-samples", type=int, default=5,
                   help="samples before the baseline is used (5; at most 10000)")
    b.add_argument("--no-learn", action="store_true", help="do not update the baseline")
    b.add_argument("--state-file", type=state_file_arg, help="baseline state (default under "
                   "$GRIDXFER_HOME/checks/)")
    return p


MAX_MIN_SAMPLES = 10_000      # past it the baseline would never be used


def build(args: argparse.Namespace) -> nagiosplugin.Check:
    if args.campaign and args.journal:
        raise PluginUsage("use --campaign or --journal, not both")
    if not 0 < args.baseline_alpha <= 1:
        raise PluginUsage("--baseline-alpha must be in (0, 1]")
    if not 1 <= args.baseline_min_samples <= MAX_MIN_SAMPLES:
        raise PluginUsage(f"--baseline-min-samples must be 1-{MAX_MIN_SAMPLES} (a check "
                          f"every 5 min learns {MAX_MIN_SAMPLES} samples in 35 days)")
    res = Throughput(args)
    return GxCheck(res,
                   nagiosplugin.ScalarContext("floor", args.warning, args.critical,
                                              fmt_metric="throughput {value} MB/s"),
                   nagiosplugin.ScalarContext("baseline", args.baseline_warning,
                                              args.baseline_critical,
                                              fmt_metric="{value}% of baseline"),
                   nagiosplugin.ScalarContext("info"),
                   IdleContext("idle", args.idle if args.idle != "evaluate" else "ok", idle_line),
                   LineSummary(res, describe), name=NAME, prom_file=args.prom_file)


def main(argv: list[str] | None = None) -> None:
    run_plugin(NAME, build_parser(), build, argv)
