"""`gridxfer tune advise` and `tune plan`: the arithmetic of tuning (bandwidth-delay product,
service-challenge capacity), no host touched; `cli/tune.py` adds them to its group."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from gridxfer.cli import params
from gridxfer.errors import UsageError
from gridxfer.limits import MAX_BITRATE, MAX_BYTERATE, MAX_RTT, MAX_SIZE, MAX_STREAMS


class _RateRange(click.ParamType):
    """``20MB/s`` or ``15-20MB/s``: (low, high) bytes/s, the high end within MAX_BYTERATE."""

    name = "rate"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> tuple[float, float]:
        from gridxfer.tuning.plan import parse_rate_range
        if isinstance(value, tuple):
            return value
        try:
            low, high = parse_rate_range(str(value))
        except UsageError as exc:
            self.fail(str(exc), param, ctx)
        above = MAX_BYTERATE.above(high, value)
        if low <= 0 or above:
            self.fail(above or f"{value!r}: must be more than 0", param, ctx)
        return low, high


@click.command("advise")
@click.option("--bandwidth", required=True, metavar="RATE",
              type=params.bitrate(MAX_BITRATE, unit_example="10Gbit/s (or 1G, 900Mbit/s)"),
              help="Path bandwidth with its unit, e.g. 10Gbit/s, 1G, 900Mbit/s.")
@click.option("--rtt", required=True, metavar="DURATION",
              type=params.duration(MAX_RTT, unit_example="18ms (or 0.018s)"),
              help="Round-trip time with its unit, e.g. 18ms, 0.1s.")
@click.option("--streams", default=1, show_default=True, type=params.Whole(MAX_STREAMS),
              help="Parallel TCP streams.")
@click.option("--headroom", default=1.25, show_default=True,
              type=params.Number(1, 4),
              help="Window = BDP x headroom (the SC seed ran 1.2-1.3x).")
@click.option("--write-profile", "write_profile", type=params.NewFile(suffix=".conf"),
              help="Write the advice as a sysctl.d profile to this .conf file (its "
                   "directory must exist).")
@click.option("--dry-run", is_flag=True, help="Print the profile instead of writing it.")
@click.option("--json", "as_json", is_flag=True)
def advise_cmd(bandwidth, rtt, streams, headroom, write_profile, dry_run, as_json) -> None:
    """Socket buffers from the bandwidth-delay product, with the arithmetic shown."""
    from gridxfer.cli.tune import _emit_json, _jsonable
    from gridxfer.tuning.advise import advice_profile, advise
    a = advise(bandwidth, rtt, streams=streams, headroom=headroom)
    text = None
    if write_profile:
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
@click.option("--rate", required=True, type=params.byterate(MAX_BYTERATE),
              help="Nominal inflow, e.g. 200MB/s.")
@click.option("--tape-drive-rate", type=_RateRange(),
              help="Per-drive rate or range, e.g. 20MB/s or 15-20MB/s.")
@click.option("--tape-target", type=params.byterate(MAX_BYTERATE),
              help="Rate to tape, e.g. 60MB/s (default: --rate).")
@click.option("--buffer", "buffer_", type=params.size(MAX_SIZE),
              help="Disk buffer in front of tape, e.g. 50TB.")
@click.option("--json", "as_json", is_flag=True)
def plan_cmd(rate, tape_drive_rate, tape_target, buffer_, as_json) -> None:
    """Service-challenge capacity arithmetic: link size, tape drives, buffer time-to-full."""
    from gridxfer.cli.tune import _emit_json
    from gridxfer.tuning.plan import plan
    res = plan(rate, tape_target=tape_target, drive_rate=tape_drive_rate,
               buffer_bytes=int(buffer_) if buffer_ is not None else None)
    if as_json:
        _emit_json(res)
    else:
        for step in res.steps:
            click.echo(step)
