"""`gridxfer tune advise` and `tune plan`: the arithmetic of tuning (bandwidth-delay product,
service-challenge capacity), no host touched; `cli/tune.py` adds them to its group."""
from __future__ import annotations

import re
from pathlib import Path

import click

from gridxfer.errors import UsageError
from gridxfer.limits import (MAX_BITRATE, MAX_BYTERATE, MAX_RTT, MAX_SIZE, MAX_STREAMS,
                             parse_within, require)
from gridxfer.units import parse_bitrate, parse_byterate, parse_duration, parse_size

_BARE_NUMBER = re.compile(r"\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*", re.A)


def _require_unit(raw: str, option: str, example: str) -> None:
    """A bare number is refused: `--bandwidth 10 --rtt 18` would be 10 bit/s and 18 s."""
    if _BARE_NUMBER.fullmatch(raw):
        raise UsageError(f"{option} {raw.strip()}: a number needs its unit, e.g. "
                         f"{option} {example}")


@click.command("advise")
@click.option("--bandwidth", required=True,
              help="Path bandwidth with its unit, e.g. 10Gbit/s, 1G, 900Mbit/s.")
@click.option("--rtt", required=True, help="Round-trip time with its unit, e.g. 18ms, 0.1s.")
@click.option("--streams", default=1, show_default=True, type=int, help="Parallel TCP streams.")
@click.option("--headroom", default=1.25, show_default=True, type=float,
              help="Window = BDP x headroom (the SC seed ran 1.2-1.3x).")
@click.option("--write-profile", "write_profile", type=click.Path(dir_okay=False),
              help="Write the advice as a sysctl.d profile to this .conf file.")
@click.option("--dry-run", is_flag=True, help="Print the profile instead of writing it.")
@click.option("--json", "as_json", is_flag=True)
def advise_cmd(bandwidth, rtt, streams, headroom, write_profile, dry_run, as_json) -> None:
    """Socket buffers from the bandwidth-delay product, with the arithmetic shown."""
    from gridxfer.cli.tune import _emit_json, _jsonable
    from gridxfer.tuning.advise import advice_profile, advise
    _require_unit(bandwidth, "--bandwidth", "10Gbit/s (or 1G, 900Mbit/s)")
    _require_unit(rtt, "--rtt", "18ms (or 0.018s)")
    a = advise(parse_within(bandwidth, parse_bitrate, MAX_BITRATE, "--bandwidth"),
               parse_within(rtt, parse_duration, MAX_RTT, "--rtt"),
               streams=int(require(streams, MAX_STREAMS, "--streams")), headroom=headroom)
    text = None
    if write_profile:
        if not write_profile.endswith(".conf"):
            raise UsageError(f"--write-profile {write_profile}: must end in .conf")
        text = advice_profile(a, Path(write_profile).stem)
        if not dry_run:
            Path(write_profile).write_text(text, encoding="utf-8")
    if as_json:
        _emit_json({**_jsonable(a), "sysctl": a.sysctl(), "profile_written":
                    write_profile if write_profile and not dry_run else None})
        return
    for step in a.steps:
        click.echo(step)
    click.echo("recommended:")
    for k, v in a.sysctl().items():
        click.echo(f"  {k} = {v}")
    if text and dry_run:
        click.echo(f"--- would write {write_profile}:\n{text}", nl=False)
    elif text:
        click.echo(f"wrote {write_profile}")


@click.command("plan")
@click.option("--rate", required=True, help="Nominal inflow, e.g. 200MB/s.")
@click.option("--tape-drive-rate", help="Per-drive rate or range, e.g. 20MB/s or 15-20MB/s.")
@click.option("--tape-target", help="Rate to tape, e.g. 60MB/s (default: --rate).")
@click.option("--buffer", "buffer_", help="Disk buffer in front of tape, e.g. 50TB.")
@click.option("--json", "as_json", is_flag=True)
def plan_cmd(rate, tape_drive_rate, tape_target, buffer_, as_json) -> None:
    """Service-challenge capacity arithmetic: link size, tape drives, buffer time-to-full."""
    from gridxfer.cli.tune import _emit_json
    from gridxfer.tuning.plan import parse_rate_range, plan
    def rate_of(raw: str, option: str) -> float:
        return parse_within(raw, parse_byterate, MAX_BYTERATE, option)
    drive = parse_rate_range(tape_drive_rate) if tape_drive_rate else None
    if drive:
        require(drive[1], MAX_BYTERATE, "--tape-drive-rate", tape_drive_rate)
    res = plan(rate_of(rate, "--rate"),
               tape_target=rate_of(tape_target, "--tape-target") if tape_target else None,
               drive_rate=drive,
               buffer_bytes=parse_within(buffer_, parse_size, MAX_SIZE, "--buffer")
               if buffer_ else None)
    if as_json:
        _emit_json(res)
    else:
        for step in res.steps:
            click.echo(step)
