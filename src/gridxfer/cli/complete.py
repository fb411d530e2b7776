"""Shell completion: click's own protocol (its environment variable is in the README).

``attach`` gives the arguments of every command their candidates, by what they name:
campaign names (``campaign resume|status|report|cancel|verify NAME``), sysctl profile names
(``tune ... PROFILE``), testbed inventory names (``copy SRC DST``, ``testbed exec HOST``),
and a campaign's endpoint and tier names (``--endpoint``, ``--tier`` of ``status`` and
``report``). Candidates come from the same places the commands read; any error while
completing offers nothing (a shell must never see a traceback).
"""
from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable

import click

Completer = Callable[[click.Context, click.Parameter, str], list[str]]


def _safe(fn: Callable[[click.Context], list[str]]) -> Completer:
    def complete(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
        try:
            items = fn(ctx)
        except Exception:           # noqa: BLE001  (a shell must never see a traceback)
            return []
        return [i for i in items if i.startswith(incomplete)]
    return complete


def campaigns(ctx: click.Context) -> list[str]:
    from gridxfer.campaign.journal.store import list_journals
    return [p.stem for p in list_journals()]


def profiles(ctx: click.Context) -> list[str]:
    from gridxfer.tuning.profile import list_profiles
    return [p.stem for p in list_profiles()]


def inventory(ctx: click.Context) -> list[str]:
    from gridxfer.testbed.inventory import load_inventory
    inv = load_inventory()
    names = [*inv.endpoints, *(e.davs_name for e in inv.endpoints.values() if e.davs_name)]
    return sorted(set(names))


def hosts(ctx: click.Context) -> list[str]:
    from gridxfer.testbed.inventory import load_inventory
    inv = load_inventory()
    if inv.mode == "netns":
        return sorted({e.host for e in inv.endpoints.values() if e.host})
    return ["local", *sorted(inv.endpoints)]


def _from_journals(ctx: click.Context, read: Callable[[sqlite3.Connection], Iterable[str]]
                   ) -> list[str]:
    """``read`` of the journal of the campaign named on the command line (click does not
    parse it while an option waits for its value: then of every campaign), merged."""
    from gridxfer.campaign.journal import store
    name = ctx.params.get("name")
    paths = [store.journal_path(str(name))] if name else store.list_journals()
    out: set[str] = set()
    for path in paths:
        conn = store.connect(path, readonly=True)
        try:
            out.update(read(conn))
        finally:
            conn.close()
    return sorted(out)


def endpoints(ctx: click.Context) -> list[str]:
    """The endpoint names of the campaign named on the command line (else of every one)."""
    from gridxfer.campaign.journal import names
    return _from_journals(ctx, lambda conn: names.read(conn).values())


def tiers(ctx: click.Context) -> list[str]:
    """The tiers of the campaign named on the command line (else of every campaign)."""
    from gridxfer.campaign.journal import store
    return _from_journals(ctx, store.tally)


# (group, command or "*", parameter name) -> candidates
RULES: dict[tuple[str, str, str], Callable[[click.Context], list[str]]] = {
    ("campaign", "*", "name"): campaigns,
    ("campaign", "status", "endpoint"): endpoints,
    ("campaign", "report", "endpoint"): endpoints,
    ("campaign", "status", "tier"): tiers,
    ("campaign", "report", "tier"): tiers,
    ("tune", "*", "profile"): profiles,
    ("", "copy", "args"): inventory,
    ("testbed", "exec", "host"): hosts,
}


def attach(cmd: click.Command, group: str = "") -> click.Command:
    """Set the completion of ``cmd``'s parameters (and of every command under it)."""
    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            attach(sub, cmd.name or "")
        return cmd
    for p in cmd.params:
        rule = RULES.get((group, cmd.name or "", p.name or "")) \
            or RULES.get((group, "*", p.name or ""))
        if rule is not None and getattr(p, "_custom_shell_complete", None) is None:
            p._custom_shell_complete = _safe(rule)
    return cmd
