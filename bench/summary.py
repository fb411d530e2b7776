"""`python -m bench --summary`: where each goal stands, from bench/results/*.jsonl.

For each results file, the latest record of the suite's command (``make bench``'s
configuration; the latest record of any command when the suite has no entry of that
name, e.g. netbench: then one per distinct command) as a markdown table: the goal, the
figure, the target, the ratio and met or not. The ratio is figure / target, inverted for
an "at most" goal, so that >= 1.00 always means met. BENCHMARKS.md is written by hand
from this output (it adds what a table cannot: medians, thin margins, failing peers).
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.record import RESULTS, read_records


def margin(goal: dict[str, Any]) -> float | None:
    """figure / target (target / figure for an at-most goal): >= 1 is met."""
    m, t = goal.get("measured"), goal.get("target")
    if m is None or t is None:
        return None
    if goal.get("at_most"):
        return t / m if m else None
    return m / t if t else None


def _num(x: Any, unit: str) -> str:
    if x is None:
        return "-"
    text = f"{x:,.4g}" if abs(x) < 1000 else f"{x:,.0f}"
    return text + ("x" if unit == "x" else f" {unit}" if unit else "")


def latest(records: list[dict], command: str | None) -> list[dict]:
    """The latest record of ``command``; without one, the latest of each command."""
    if command is not None:
        mine = [r for r in records if r.get("command") == command]
        return [max(mine, key=lambda r: r["date"])] if mine else []
    by_command: dict[str, dict] = {}
    for r in records:
        if r["command"] not in by_command or r["date"] >= by_command[r["command"]]["date"]:
            by_command[r["command"]] = r
    return sorted(by_command.values(), key=lambda r: r["date"])


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_one(name: str, recs: list[dict], runs: int) -> str:
    """One table; with several commands (netbench) the command is a column."""
    many = len(recs) > 1
    lines = [f"## {name} ({runs} records in bench/results/{name}.jsonl)", ""]
    if not many:
        rec = recs[0]
        lines += [f"`{rec['command']}`: {rec['date']}, commit {rec.get('commit') or '?'}", ""]
    head = ["goal", "figure", "target", "ratio", "status"] + (["date", "command"] if many else [])
    lines += ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for rec in recs:
        for g in rec["goals"]:
            m = margin(g)
            cells = [g["goal"], _num(g["measured"], g.get("unit", "")),
                     _num(g["target"], g.get("unit", "")), "-" if m is None else f"{m:.2f}",
                     "met" if g.get("met") else "NOT MET"]
            if many:
                cells += [rec["date"], f"`{rec['command']}`"]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def render(directory: Path = RESULTS, suite: Iterable[Any] = ()) -> str:
    commands = {e.name: e.command for e in suite}
    out = []
    for path in sorted(directory.glob("*.jsonl")):
        records = read_records(path)
        if not records:
            continue
        recs = latest(records, commands.get(path.stem))
        if not recs:                   # the suite's command never ran: the latest of any
            recs = latest(records, None)[-1:]
        out.append(render_one(path.stem, recs, len(records)))
    return "\n".join(out) if out else f"no records under {directory}\n"
