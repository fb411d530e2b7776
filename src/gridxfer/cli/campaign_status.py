"""`gridxfer campaign status|report|list` (registered on the `campaign` group by
cli/campaign.py): the read side of a journal, as text or ``--json``."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING
from collections.abc import Callable

import click

if TYPE_CHECKING:
    from rich.console import Console

from gridxfer.cli import params
from gridxfer.limits import MAX_DURATION
from gridxfer.display import printable
from gridxfer.units import fmt_bytes
from gridxfer.cli.campaign import _echo, _echo_json, group


def _console() -> Console:
    from rich.console import Console       # imported on use: 50 ms of every start
    con = Console(highlight=False)
    return con if con.is_terminal else Console(highlight=False, width=200)


def _filter_options(f: Callable) -> Callable:
    opts = [
        click.option("--tier", default=None, metavar="TIER", help="Only this tier."),
        click.option("--endpoint", default=None, metavar="NAME",
                     help="Only this destination endpoint: its name or URL, or a glob."),
        click.option("--failed", is_flag=True, help="Only files that failed (and list them)."),
        click.option("--since", default=None, metavar="WHEN", type=params.Since(MAX_DURATION),
                     help="Only what changed since WHEN: a duration ago (2h, 30m) or an "
                          "ISO 8601 time (2026-11-24T10:00Z; without a zone: local time)."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _filters(tier: str | None, endpoint: str | None, failed: bool, since: float | None):
    from gridxfer.campaign.report.filters import Filters
    return Filters(tier=tier, endpoint=endpoint, failed=failed, since=since)


@group.command("status")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON (schema 1).")
@click.option("--links", is_flag=True,
              help="Current concurrency per link and the optimizer's reason.")
@_filter_options
def status_cmd(name: str, as_json: bool, links: bool, tier: str | None, endpoint: str | None,
               failed: bool, since: float | None) -> None:
    """Files and bytes per state and tier of campaign NAME.

    "in flight" counts files handed to a worker: moving data, being verified, or (small
    files, dispatched ahead in bundles) waiting for one of the link's max_active slots.
    The live view of `campaign run` shows the running ones and the queued ones apart."""
    from gridxfer.campaign.report.status import campaign_status
    filters = _filters(tier, endpoint, failed, since)
    render_status(campaign_status(name, links=links, filters=filters), as_json, links)


def render_status(st, as_json: bool, links: bool) -> None:
    if as_json:
        from gridxfer.cli import jsonshape
        _echo_json(jsonshape.status(st))
        return
    if st.error:                        # stopped while planning: nothing else to show
        _echo(f"campaign {st.name}: {st.state}: {st.error}")
        return
    total = sum(st.files.values())
    f = st.files
    if st.filters:
        _echo(f"(only {_described(st.filters)})")
    from gridxfer.cli.columns import summary, terminal_width
    for line in summary(f"campaign {st.name}: {st.state}: {f.get('done', 0)}/{total} done, "
                        f"{f.get('failed', 0)} failed, {f.get('active', 0)} in flight, "
                        f"{f.get('pending', 0)} pending, {fmt_bytes(st.bytes.get('done', 0))} "
                        f"of {fmt_bytes(sum(st.bytes.values()))}", terminal_width()):
        _echo(line)
    for tier, by in sorted(st.tiers.items()):
        _echo(f"  {tier}: " + ", ".join(f"{k} {v}" for k, v in sorted(by.items())))
    for p in st.paused:                         # waiting for a token (engine/credentials)
        _echo(f"  {printable(p['reason'])}")
    if st.tape is not None:
        from gridxfer.campaign.report.tape import render as render_tape
        for line in render_tape(st.tape):
            _echo(f"  {line}")
    if links:
        if not st.links:
            _echo("  (no optimizer decisions journalled yet)")
        width = terminal_width()
        for ln in st.links:
            for line in summary(f"  link {ln['tier']}: active {ln['active']} ({ln['reason']}; "
                                f"{ln['decisions']} decisions)", width):
                _echo(line)
        for ex in st.excluded:
            until = (f" until {time.strftime('%H:%M:%S', time.localtime(ex['until']))}"
                     if ex["until"] else "")
            for line in summary(f"  excluded {ex['tier']} {ex['endpoint']}: "
                                f"{printable(ex['reason'])}{until}", width):
                _echo(line)
    if st.filters.failed:
        _failed_lines(st.failed_files, st.names, _echo)


def _described(f) -> str:
    from gridxfer.cli.jsonshape import iso
    parts = [f"tier {f.tier}" if f.tier else "", f"endpoint {f.endpoint}" if f.endpoint else "",
             "failed files" if f.failed else "", f"since {iso(f.since)}" if f.since else ""]
    return ", ".join(p for p in parts if p)


def _failed_lines(rows, names: dict[str, str], out: Callable[[str], None]) -> None:
    from gridxfer.campaign.journal.names import name_of
    for r in rows[:20]:
        where = f" at {name_of(names, r['endpoint'])}" if r.get("endpoint") else ""
        out(f"  FAILED {r['tier']} {printable(r['name'])}{where}: {r['error_class']}: "
            f"{printable(r['error_msg'] or '')} ({r['attempts']} attempts)")
    if len(rows) > 20:
        out(f"  ... and more ({len(rows)} shown by --json)")


@group.command("report")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (schema 1).")
@click.option("--png", "png", type=params.NewFile(), default=None,
              help="Write a throughput timeline PNG to this file.")
@_filter_options
def report_cmd(name: str, as_json: bool, png: str | None, tier: str | None,
               endpoint: str | None, failed: bool, since: float | None) -> None:
    """Throughput statistics per link and endpoint, distribution, shares over time."""
    from gridxfer.campaign.report.png import write_png
    from gridxfer.campaign.report.summary import build_report
    filters = _filters(tier, endpoint, failed, since)
    rep = build_report(name, filters=filters)
    out = str(write_png(name, png, filters)) if png else None
    if as_json:
        from gridxfer.cli import jsonshape
        from gridxfer.campaign.report.status import campaign_status
        _echo_json(jsonshape.report(rep, campaign_status(name, filters=filters), out))
        return
    if filters:
        _echo(f"(only {_described(filters)})")
    from gridxfer.cli.report_text import render_report
    render_report(rep, _console())
    if out:
        _echo(f"timeline: {out}")


@group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def list_cmd(as_json: bool) -> None:
    """Campaign journals under $GRIDXFER_HOME/campaigns."""
    from gridxfer.campaign.report.status import list_campaigns
    items = list_campaigns()
    if as_json:
        from gridxfer.cli import jsonshape
        _echo_json(jsonshape.listing(items))
        return
    if not items:
        _echo("no campaigns")
    for s in items:
        if s.error:                     # unreadable, or stopped while planning
            click.echo(f"{s.name:24} {s.state:12} {s.error}")
            continue
        total = sum(s.files.values())
        _echo(f"{s.name:24} {s.state:12} {s.files.get('done', 0)}/{total} done, "
                   f"{s.files.get('failed', 0)} failed  {s.journal}")
