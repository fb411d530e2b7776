"""`gridxfer campaign verify NAME` (registered on the `campaign` group by cli/campaign.py):
parse, call ``campaign.verify``, render."""
from __future__ import annotations

import click

from gridxfer.errors import PartialFailure
from gridxfer.display import printable
from gridxfer.cli.campaign import _echo, _echo_json, group

SHOWN = 50      # issues listed in text; --json lists every one


@group.command("verify")
@click.argument("name")
@click.option("--fix", is_flag=True,
              help="Delete the differing copies and put missing and different files back "
                   "to pending (then: gridxfer campaign resume NAME).")
@click.option("--tier", default=None, help="Only the files of this destination tier.")
@click.option("--checkers", default=4, show_default=True, type=click.IntRange(1, 64),
              help="Files checked at once.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def verify_cmd(name: str, fix: bool, tier: str | None, checkers: int, as_json: bool) -> None:
    """Check every done file of campaign NAME at its destination against its source:
    present, same size, same adler32 (like rclone check).

    \b
    Exit 0 when every file matches, 3 when some are missing, differ or could not be
    checked (listed). --fix needs the campaign not to be running (its lock)."""
    from gridxfer.campaign.verify import verify_campaign
    r = verify_campaign(name, fix=fix, checkers=checkers, tier=tier)
    if as_json:
        _echo_json(r.to_dict())
    else:
        for i in r.issues[:SHOWN]:
            _echo(f"  {i.problem.upper()} {i.tier} {printable(i.name)}: {printable(i.detail)} "
                  f"({printable(i.dst_url)})")
        if len(r.issues) > SHOWN:
            _echo(f"  ... and {len(r.issues) - SHOWN} more (--json lists every one)")
        _echo(f"campaign {name}: {r.checked} done files checked: {r.matching} match, "
              f"{r.count('missing')} missing, {r.count('size') + r.count('checksum')} "
              f"different, {r.count('unchecked')} could not be checked"
              + (f"; {r.removed} bad copies removed, {r.requeued} files requeued"
                 if fix else ""))
    if r.issues:
        hint = (f"copy them again with: gridxfer campaign resume {name}" if fix and r.requeued
                else f"requeue them with: gridxfer campaign verify {name} --fix"
                if r.different else "see the lines above")
        raise PartialFailure(f"{len(r.issues)} of {r.checked} files do not match; {hint}")
