"""``campaign report`` as text: the tables fit the console's width (``cli/columns.py``):
at 80 columns stddev, min, max and then bytes are left out, whole; no figure is cut."""
from __future__ import annotations

import json
import math
from typing import Any

from gridxfer.cli.columns import Column, lines, table
from gridxfer.display import printable
from gridxfer.redact import redact
from gridxfer.units import fmt_bytes, fmt_duration, fmt_rate


def _num(x: float, step: float) -> str:
    """x with as many decimals as the step between values needs."""
    decimals = max(0, min(6, -int(math.floor(math.log10(step) + 1e-9)) if step > 0 else 0))
    return f"{x:.{decimals}f}"


def group_columns(first: str, keys: list[str], groups: Any) -> list[Column]:
    fails = tuple(", ".join(f"{k} {v}" for k, v in sorted(g.failures.items())) or "-"
                  for g in groups)
    return [Column(first, tuple(keys), right=False),
            Column("files", tuple(str(g.files_done) for g in groups)),
            Column("failed", tuple(str(g.files_failed) for g in groups)),
            Column("bytes", tuple(fmt_bytes(g.bytes) for g in groups), keep=4),
            Column("mean", tuple(fmt_rate(g.mean_rate) for g in groups)),
            Column("min", tuple(fmt_rate(g.min_rate) for g in groups), keep=2),
            Column("max", tuple(fmt_rate(g.max_rate) for g in groups), keep=3),
            Column("stddev", tuple(fmt_rate(g.stddev_rate) for g in groups), keep=1),
            Column("failed attempts", fails, keep=5, right=False, wrap=True)]


def histogram_columns(bins: Any) -> list[Column]:
    ranges = []
    for b in bins:
        step = (b.high - b.low) / 1e6
        ranges.append(f"{_num(b.low / 1e6, step)} - {_num(b.high / 1e6, step)}")
    return [Column("MB/s", tuple(ranges)), Column("transfers", tuple(str(b.count) for b in bins)),
            Column("%", tuple(f"{100 * b.share:.1f}" for b in bins)),
            Column("", tuple("#" * round(40 * b.share) for b in bins), keep=1, right=False)]


def render_report(rep: Any, con: Any) -> None:
    from gridxfer.campaign.journal.names import name_of
    width = con.width
    head = [f"campaign {rep.name} ({rep.state}):", f"{rep.files_done}/{rep.files_total} files,",
            f"{rep.files_failed} failed,", f"{fmt_bytes(rep.bytes_done)} in",
            f"{fmt_duration(rep.seconds)},", f"aggregate {fmt_rate(rep.rate)}"]
    for line in lines(head, width, sep=" "):
        con.print(line, markup=False, highlight=False)
    if rep.job_metadata is not None:
        con.print(redact(f"job_metadata: {json.dumps(rep.job_metadata, sort_keys=True)}"),
                  markup=False, highlight=False)
    con.print(table(group_columns("link", [g.key for g in rep.links], rep.links), width,
                    title="per link"))
    eps = [redact(name_of(rep.names, g.key)) for g in rep.endpoints]
    con.print(table(group_columns("endpoint", eps, rep.endpoints), width,
                    title="per destination endpoint"))
    if rep.histogram:
        con.print(table(histogram_columns(rep.histogram), width,
                        title="per-transfer throughput distribution"))
    if rep.share.endpoints:
        from gridxfer.campaign.report.share import render_share
        con.print("share per destination endpoint", style="bold")
        con.print(redact(render_share(rep.share, rep.names, width)), markup=False,
                  highlight=False, soft_wrap=True)
    if rep.tape is not None:
        from gridxfer.campaign.report.tape import render as render_tape
        for line in render_tape(rep.tape):
            con.print(line, markup=False, highlight=False)
    for f in rep.failed_files[:20]:
        con.print(redact(f"FAILED {f['tier']} {printable(f['name'])}: {f['error_class']}: "
                         f"{printable(f['error_msg'] or '')}"), markup=False)
