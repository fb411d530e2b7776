"""`gridxfer campaign cancel NAME` (registered on the `campaign` group by cli/campaign.py):
parse, call ``campaign.cancel``, render."""
from __future__ import annotations

import click

from gridxfer.cli import params
from gridxfer.limits import MAX_DURATION
from gridxfer.cli.campaign import _echo, _echo_json, group


@group.command("cancel")
@click.argument("name")
@click.option("--wait", "wait", default="60s", show_default=True, metavar="DURATION",
              type=params.duration(MAX_DURATION, zero=True),
              help="How long to wait for a running campaign to stop.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def cancel_cmd(name: str, wait: float, as_json: bool) -> None:
    """Stop campaign NAME, or cancel its pending files.

    \b
    Running (another process holds its lock): that process gets SIGTERM and stops as
    after Ctrl-C (exit 4; `resume` continues it).
    Not running: what an earlier run left is cleaned up and every pending file is
    marked cancelled; `resume --retry-cancelled` brings them back."""
    from gridxfer.campaign.cancel import cancel_campaign
    r = cancel_campaign(name, wait=wait)
    if as_json:
        _echo_json(r.to_dict())
    elif r.stopped_pid is not None:
        _echo(f"campaign {name}: stopped pid {r.stopped_pid}; "
              f"continue with: gridxfer campaign resume {name}")
    else:
        what = f"{r.cancelled} pending files cancelled" if not r.fts3_jobs else \
            (f"{r.cancelled - r.fts3_files} pending files and the {r.fts3_files} files of "
             f"{r.fts3_jobs} FTS3 jobs cancelled")
        _echo(f"campaign {name}: {what}, {r.removed} temporary or partial files removed; run "
              f"them later with: gridxfer campaign resume {name} --retry-cancelled")
    if r.fts3_unknown and not as_json:
        _echo(f"campaign {name}: the FTS3 server had no record of {r.fts3_unknown} of its "
              f"jobs (purged, or not this server's); their files are cancelled here")
