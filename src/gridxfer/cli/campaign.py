"""`gridxfer campaign run|resume` (and the group: `cancel`, `verify`, `status`, `report`,
`list` live in cli/campaign_*.py): parse, call the core, render.

Exit codes come from gridxfer.errors only: PartialFailure (3) after rendering when some
files failed, Interrupted (4) when stopped by Ctrl-C/SIGTERM (resumable).
"""
from __future__ import annotations

import contextlib
import json
from typing import Any
from collections.abc import Callable

import click

from gridxfer.cli import campaign_alerts
from gridxfer.errors import Interrupted, PartialFailure
from gridxfer.display import printable
from gridxfer.redact import redact, redact_obj
from gridxfer.units import fmt_bytes, fmt_duration, fmt_rate


def _echo_json(obj: Any) -> None:
    click.echo(json.dumps(redact_obj(obj), indent=2, sort_keys=True, default=str))


def _echo(text: str) -> None:
    """Every text line of these commands: journals of older versions may hold credentials."""
    click.echo(redact(text))


@click.group(name="campaign")
def group() -> None:
    """Run, resume and report bulk transfer campaigns."""


def _execute(name: str, start: Callable[..., Any], *, quiet: bool, as_json: bool,
             alerts: campaign_alerts.Alerts, selector: str | None):
    observers = alerts.observers()
    with contextlib.ExitStack() as stack:
        if not quiet and not as_json:
            from gridxfer.cli.progress import LiveProgress      # rich: only when shown
            live = stack.enter_context(LiveProgress(name))
            observers.append(live)
        from gridxfer.campaign.journal.store import journal_path
        from gridxfer.campaign.journal.check import reading
        try:
            with reading(journal_path(name)):      # a full disk, a damaged journal: one line
                result = start(observers=observers, selector_name=selector)
            alerts.finish(result)           # the services must not keep their last alert
        finally:
            alerts.close()
    _render_result(result, as_json)
    if result.state == "interrupted":
        why = f"stopped waiting for a token: {result.paused}" if result.paused else "interrupted"
        raise Interrupted(f"campaign {result.name} {why}; "
                          f"continue with: gridxfer campaign resume {result.name}")
    failed = result.files_failed - result.cancelled
    if failed:
        exists = sum(1 for f in result.failures if f.error_class == "exists")
        raise PartialFailure(
            f"{failed} of {result.files_total} files failed "
            f"(details: gridxfer campaign report {result.name})"
            + (f"; {exists} exist at the destination: set `overwrite: true` in the campaign "
               f"file, then `gridxfer campaign resume {result.name} --reload --retry-failed`"
               if exists else ""))
    if result.cancelled:
        raise PartialFailure(f"{result.cancelled} of {result.files_total} files are cancelled; "
                             f"run them with: gridxfer campaign resume {result.name} "
                             f"--retry-cancelled")


def _render_result(r, as_json: bool) -> None:
    if as_json:
        from gridxfer.cli import jsonshape
        from gridxfer.campaign.report.status import campaign_status
        _echo_json(jsonshape.run(r, None if r.dry_run else campaign_status(r.name)))
        return
    from gridxfer.cli.columns import summary, terminal_width
    verb = "would transfer" if r.dry_run else r.state
    for line in summary(
            f"campaign {r.name}: {verb}: {r.files_done}/{r.files_total} files done, "
            f"{r.files_failed} failed, {fmt_bytes(r.bytes_done)} of {fmt_bytes(r.bytes_total)}"
            + ("" if r.dry_run else f" in {fmt_duration(r.seconds)} ({fmt_rate(r.mean_rate)})")
            + (f", {r.recovered} recovered after a crash" if r.recovered else ""),
            terminal_width()):
        _echo(line)
    if r.cleaned is not None:
        _echo(f"cleanup: {r.cleaned} temporary or partial files left by earlier runs "
                   f"removed")
    if r.cancelled:
        _echo(f"{r.cancelled} files cancelled by `gridxfer campaign cancel` were not run "
                   f"(resume --retry-cancelled runs them)")
    failures = [f for f in r.failures if f.error_class != "cancelled"]
    for f in failures[:20]:
        _echo(f"  FAILED {f.tier} {printable(f.name)}: {f.error_class}: "
              f"{printable(f.error_msg or '')} ({f.attempts} attempts)")
    if len(failures) > 20:
        _echo(f"  ... and {len(failures) - 20} more")
    if not r.dry_run:
        _echo(f"journal: {r.journal}")


@group.command("run")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--quiet", is_flag=True, help="No live progress; only the final summary (cron).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--dry-run", is_flag=True,
              help="Show the plan and probe every endpoint once; transfer nothing.")
@click.option("--show", "show", type=click.IntRange(0, 10_000), default=10, show_default=True,
              help="--dry-run: how many source -> destination pairs to show.")
@click.option("--no-probe", is_flag=True, help="--dry-run: do not contact the endpoints.")
@click.option("--selector", default=None, help="Destination selector for every tier.")
@click.option("--replace", is_flag=True, help="Discard an existing journal of the same name.")
@click.option("--engine", type=click.Choice(["local", "fts3"]), default=None,
              help="Who moves the files: this host (local) or an FTS3 server (fts3).")
@click.option("--fts3", "fts3", default=None, metavar="URL",
              help="The FTS3 REST endpoint (https://host:8446); implies --engine fts3.")
@campaign_alerts.options
def run_cmd(file: str, quiet: bool, as_json: bool, dry_run: bool, show: int, no_probe: bool,
            selector: str | None, replace: bool, engine: str | None, fts3: str | None,
            **kw: Any) -> None:
    """Run the campaign described in FILE (YAML).

    --dry-run shows the plan (the first transfers, files and bytes per tier), probes every
    endpoint once (reachable, writable, free space) and flags those a run could not use;
    it fails where a run would (exit 2 bad input, 3 files a run would fail)."""
    from gridxfer.campaign import runner
    from gridxfer.campaign.spec.schema import load_spec
    from gridxfer.campaign.spec import engine as engine_spec
    _check_selector(selector)
    spec = engine_spec.override(load_spec(file), engine, fts3)    # --dry-run plans this one
    alerts = campaign_alerts.Alerts.from_options(spec.name, kw)     # a dry run checks them too
    if dry_run:
        from gridxfer.cli import campaign_plan
        runner.prepare_environment(spec)
        campaign_plan.render(runner.dry_run(spec, replace=replace, probe=not no_probe,
                                            pairs=show), as_json)
        return
    _execute(spec.name, lambda **k: runner.run_campaign(file, replace=replace, engine=engine,
                                                        fts3=fts3, **k),
             quiet=quiet, as_json=as_json, alerts=alerts, selector=selector)


@group.command("resume")
@click.argument("name")
@click.option("--quiet", is_flag=True, help="No live progress; only the final summary (cron).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--selector", default=None, help="Destination selector for every tier.")
@click.option("--dry-run", is_flag=True, help="Show what is left to do; transfer nothing.")
@click.option("--retry-failed", is_flag=True,
              help="Also retry files that failed for good (cancelled ones included).")
@click.option("--retry-cancelled", is_flag=True,
              help="Run the files `gridxfer campaign cancel` took out.")
@click.option("--reload", "reload", is_flag=True,
              help="Apply the campaign file's safe edits (overwrite, retries, timeout, "
                   "concurrency, tokens); refuse the file if it has others.")
@campaign_alerts.options
def resume_cmd(name: str, quiet: bool, as_json: bool, selector: str | None, dry_run: bool,
               retry_failed: bool, retry_cancelled: bool, reload: bool, **kw: Any) -> None:
    """Continue campaign NAME after an interruption or a crash.

    First removes what earlier runs left at the destinations (temporary names, partial
    files) and says how many; a crashed run's transfers are checked and kept or redone.
    An edited campaign file is shown (what changed); --reload applies it."""
    from gridxfer.campaign import reload as edits, runner
    _check_selector(selector)
    alerts = campaign_alerts.Alerts.from_options(name, kw)     # a dry run checks them too
    if not as_json:
        _show_edits(edits.campaign_edits(name), name, reload)
    if dry_run:
        from gridxfer.campaign.report.status import campaign_status
        from gridxfer.cli.campaign_status import render_status
        render_status(campaign_status(name), as_json, links=False)
        return
    _execute(name, lambda **k: runner.resume_campaign(
        name, retry_failed=retry_failed, retry_cancelled=retry_cancelled, reload=reload, **k),
        quiet=quiet, as_json=as_json, alerts=alerts, selector=selector)


def _show_edits(edited, name: str, reload: bool) -> None:
    """What changed in the campaign file since the journal was planned (reload.py)."""
    if edited is None or (reload and edited.refused):    # refused: the error lists them
        return
    if edited.error:
        _echo(f"campaign file {edited.path} was edited but cannot be read: {edited.error}")
        return
    _echo(f"campaign file {edited.path} changed since the journal was planned:")
    for c in edited.changes:
        _echo(f"  {c.line()}")
    if reload:
        _echo("  applied (--reload)")
    else:
        _echo(f"  not applied: `gridxfer campaign resume {name} --reload` applies them"
              + (" once the refused ones are undone" if edited.refused else ""))


def _check_selector(name: str | None) -> None:
    if name is not None:
        from gridxfer.campaign.policy.selection import make_selector
        make_selector(name)


# Imported for its side effect: it registers `campaign cancel` on this group.
from gridxfer.cli import campaign_cancel  # noqa: E402, F401
from gridxfer.cli import campaign_verify  # noqa: E402, F401  (`campaign verify`)
from gridxfer.cli import campaign_status  # noqa: E402, F401  (`status`, `report`, `list`)
