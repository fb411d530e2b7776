"""The alert options of `gridxfer campaign run|resume` (cli/campaign.py): passive Nagios
results and an ``--on-drop`` hook when throughput drops (monitoring/alerts.py) or tape falls
behind (monitoring/tapealerts.py). Each value is checked while click parses (cli/params.py);
which options need which others, here: ``Alerts.from_options`` is called before anything
else is done with the campaign, by a run and a ``--dry-run`` alike, so a bad set is one line
and exit 2 in both, before a journal is planned or an endpoint probed. Building the alerters
starts nothing (no hook runs, no command file is opened until an alert is sent)."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from gridxfer.cli import params
from gridxfer.errors import UsageError
from gridxfer.limits import MAX_BYTERATE, MAX_WINDOW

if TYPE_CHECKING:
    from gridxfer.monitoring.alerts import DropAlerter
    from gridxfer.monitoring.tapealerts import TapeAlerter


def _nagios_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A Nagios host name goes into an external command line: no ';' and no newline."""
    if value is not None and (";" in value or "\n" in value or "\r" in value):
        raise click.BadParameter(f"{value!r}: must not contain ';' or a newline", ctx, param)
    return value


def options(f: Callable) -> Callable:
    """The alert options of `campaign run` and `campaign resume`."""
    opts = [
        click.option("--alert-cmd-file", type=params.NewFile(), default=None,
                     help="Nagios external command file for passive throughput alerts "
                          "(its directory must exist)."),
        click.option("--on-drop", "on_drop", default=None, metavar="CMD",
                     help="Command run (no shell) when throughput drops or recovers."),
        click.option("--alert-floor", default=None, metavar="RATE",
                     type=params.byterate(MAX_BYTERATE, bare="MB/s"),
                     help="Alert when the aggregate rate stays below this (MB/s, or e.g. 20MB/s)."),
        click.option("--alert-baseline", default=None, metavar="FRACTION",
                     type=params.Number(0, 1, open=True, hint=" (0.5: half)"),
                     help="Alert when the rate stays below FRACTION x its moving baseline."),
        click.option("--alert-window", default="60s", show_default=True, metavar="DURATION",
                     type=params.duration(MAX_WINDOW),
                     help="How long the rate must stay low before an alert."),
        click.option("--alert-host", default=None, metavar="HOST", callback=_nagios_name,
                     help="Nagios host of the passive results (default: this host's name)."),
        click.option("--alert-tape-backlog", type=click.IntRange(min=0), default=None,
                     metavar="FILES", help="Tape alert (service gridxfer_tape): WARNING when "
                     "more files than this wait for tape for a whole --alert-window."),
        click.option("--alert-tape-wait", default=None, metavar="DURATION",
                     type=params.duration(MAX_WINDOW),
                     help="Tape alert: CRITICAL when a file waits for tape longer than this."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


@dataclass
class Alerts:
    """The run's alerters, either or both None (no alert asked for)."""

    drop: DropAlerter | None = None
    tape: TapeAlerter | None = None

    @classmethod
    def from_options(cls, name: str, kw: dict[str, Any]) -> Alerts:
        """The alerters of campaign ``name`` from the command's options; UsageError (one
        line, exit 2) for an incomplete set."""
        return cls(throughput_alerter(name, kw), tape_alerter(name, kw))

    def observers(self) -> list[Callable]:
        """What the run calls with each progress snapshot."""
        out: list[Callable] = []
        drop, tape = self.drop, self.tape
        if drop is not None:
            out.append(lambda snap: drop.observe(time.time(), snap.rate))
        if tape is not None:
            out.append(lambda snap: tape.observe(time.time(), snap.files_archiving,
                                                 snap.tape_oldest))
        return out

    def finish(self, result: Any) -> None:
        """The campaign ended: a final result (a passive service keeps its last one)."""
        done = f"{result.state}, {result.files_done}/{result.files_total} files done"
        if self.drop is not None:
            self.drop.finish(time.time(), f"{done}, {result.files_failed} failed",
                             result.mean_rate)
        if self.tape is not None:
            self.tape.finish(time.time(), f"{done} (on tape where archived)")

    def close(self) -> None:
        """Queued hooks run to completion."""
        if self.drop is not None:
            self.drop.close()
        if self.tape is not None:
            self.tape.sender.close()


def throughput_alerter(name: str, kw: dict[str, Any]) -> DropAlerter | None:
    """The throughput alert the options ask for (None: none); UsageError for options that
    need another (a threshold without a destination, a destination without a threshold)."""
    cmd_file, on_drop = kw.get("alert_cmd_file"), kw.get("on_drop")
    floor, base = kw.get("alert_floor"), kw.get("alert_baseline")
    if not (cmd_file or on_drop):
        if floor is not None or base is not None or kw.get("alert_host"):
            raise UsageError("--alert-floor/--alert-baseline/--alert-host need --alert-cmd-file "
                             "or --on-drop")
        return None
    tape = kw.get("alert_tape_backlog") is not None or kw.get("alert_tape_wait") is not None
    if floor is None and base is None and tape:
        return None                     # tape alerts only (tape_alerter)
    if floor is None and base is None:
        raise UsageError("alerts need a threshold: --alert-floor RATE, --alert-baseline "
                         "FRACTION, --alert-tape-backlog FILES or --alert-tape-wait DURATION")
    try:
        from gridxfer.monitoring.alerts import DropAlerter
    except ImportError as exc:
        raise UsageError(f"throughput alerts are not available: {exc}") from None
    from pathlib import Path
    return DropAlerter(campaign=name, floor_bytes_per_s=floor, baseline_fraction=base,
                       window=kw.get("alert_window") or 60.0, host=kw.get("alert_host"),
                       cmd_file=Path(cmd_file) if cmd_file else None, on_drop=on_drop)


def tape_alerter(name: str, kw: dict[str, Any]) -> TapeAlerter | None:
    """The tape alert (monitoring/tapealerts.py), through the same passive-result path."""
    backlog, wait = kw.get("alert_tape_backlog"), kw.get("alert_tape_wait")
    if backlog is None and wait is None:
        return None
    cmd_file, on_drop = kw.get("alert_cmd_file"), kw.get("on_drop")
    if not (cmd_file or on_drop):
        raise UsageError("--alert-tape-backlog/--alert-tape-wait need --alert-cmd-file or "
                         "--on-drop")
    from pathlib import Path
    from gridxfer.monitoring.alerts import DropAlerter
    from gridxfer.monitoring.tapealerts import SERVICE, TapeAlerter
    window = kw.get("alert_window") or 60.0
    sender = DropAlerter(campaign=name, floor_bytes_per_s=None, baseline_fraction=None,
                         window=window, host=kw.get("alert_host"), service=SERVICE,
                         cmd_file=Path(cmd_file) if cmd_file else None, on_drop=on_drop)
    return TapeAlerter(sender, max_backlog=backlog, max_wait=wait, window=window)
