"""`gridxfer campaign run --dry-run`: render the plan (``campaign/dryrun.py``) and fail
where a run would: names gridxfer refuses, a tier none of whose endpoints a run could use
(exit 3 after the plan is shown, as a run's failed files would)."""
from __future__ import annotations

import json
from typing import Any

import click

from gridxfer.errors import PartialFailure
from gridxfer.display import printable
from gridxfer.redact import redact, redact_obj
from gridxfer.units import fmt_bytes


def render(result: Any, as_json: bool) -> None:
    plan = result.plan
    if as_json:
        from gridxfer.cli import jsonshape         # the run shape, its plan under run.plan
        click.echo(json.dumps(redact_obj(jsonshape.run(result, None)), indent=2, sort_keys=True,
                              default=str))
    else:
        _text(result, plan)
    _verdict(result, plan)


def _echo(text: str) -> None:
    click.echo(redact(text))


def _text(r: Any, plan: Any) -> None:
    _echo(f"campaign {r.name}: would transfer {r.files_total} files, "
          f"{fmt_bytes(r.bytes_total)} ({len(plan.tiers)} tiers)")
    for t in plan.tiers:
        bad = f", {t.bad_names} with names refused (they would fail)" if t.bad_names else ""
        acts = (" (" + ", ".join(f"{a} {k}" for a, k in t.activities) + ")"
                if t.activities else "")
        _echo(f"  tier {t.tier} (priority {t.priority}, {t.endpoints} endpoint"
              f"{'s' if t.endpoints != 1 else ''}): {t.files} files{acts}, "
              f"{fmt_bytes(t.bytes)}{bad}")
    if plan.pairs:
        _echo(f"first {len(plan.pairs)} transfers (in dispatch order; a pool's selector "
              f"picks the endpoint, the first is shown):")
        for tier, src, dst in plan.pairs:
            _echo(f"  {tier}: {printable(src)} -> {printable(dst)}")
    for dst in plan.existing:
        _echo(f"  EXISTS {printable(dst)}: overwrite is off, a run fails it")
    for tier, name, why in plan.refused:
        _echo(f"  REFUSED {tier} {printable(name)}: {printable(why)}")
    if plan.probes:
        _echo("endpoints:")
    for p in plan.probes:
        state = ("FLAGGED: " + printable(p.problem)) if p.problem else "ok"
        facts = [k for k, v in (("reachable", p.reachable), ("writable", p.writable)) if v]
        if p.free is not None:
            facts.append(f"{fmt_bytes(p.free)} free")
        _echo(f"  {p.role}: {p.url}: {state}" + (f" ({', '.join(facts)})" if facts else ""))


def _verdict(r: Any, plan: Any) -> None:
    bad = sum(t.bad_names for t in plan.tiers)
    dead = plan.dead_tiers
    reasons = []
    if bad:
        reasons.append(f"{bad} files have names gridxfer refuses (bad_name)")
    if dead:
        reasons.append(f"no endpoint of tier {', '.join(dead)} can be used")
    if plan.existing:
        reasons.append(f"{len(plan.existing)} of the destinations shown exist and overwrite "
                       f"is off")
    if any(p.role == "source" and p.problem for p in plan.probes):
        reasons.append("the source is flagged")
    if reasons:
        raise PartialFailure(f"--dry-run: a run of {r.name} would fail files: "
                             + "; ".join(reasons))
