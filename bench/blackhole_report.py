"""The black hole benchmark's write-up (``bench.blackhole`` runs it): one ``Row`` per
campaign run, and ``render``: the markdown (setup, table, optimizer decisions), the goals
(throughput-aware >= 90 % of the ideal, >= 1.5x round-robin) and the record's figures.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass

MB = 1_000_000
FAST, SLOW = ("fast1", "fast2"), "slow"


@dataclass(frozen=True)
class Row:
    label: str
    selector: str
    optimizer: str
    exclusions: bool
    state: str
    seconds: float
    bytes: int
    files: dict[str, int]           # endpoint name -> files written there
    decisions: tuple = ()           # optimizer: (seconds since start, cap, reason)

    @property
    def rate(self) -> float:
        return self.bytes / self.seconds if self.seconds > 0 else 0.0


def render(rows: list[Row], caps: dict[str, float], total: int, args: argparse.Namespace
           ) -> tuple[str, list, dict, bool]:
    """The markdown body (setup, table, goals), the goals, the figures for the record and
    whether the targets were met."""
    from bench.common import md_table
    from bench.record import Goal

    ideal = total / sum(caps.values())
    rrs = [r for r in rows if r.selector == "round-robin"]
    dns = next((r for r in rrs if not r.exclusions), None)
    ta = next((r for r in rows if r.selector == "throughput-aware" and r.optimizer == "fixed"),
              None)
    table = []
    for r in rows:
        name = r.selector + ("" if r.exclusions else " (DNS alias: no exclusions)")
        conc = (f"fixed {args.max_active}" if r.optimizer == "fixed"
                else f"adaptive 1..{args.max_active}")
        vs = f"{r.rate / dns.rate:.2f}x" if dns and dns.rate > 0 else "-"
        table.append([name, conc, r.state, f"{r.seconds:.1f} s", f"{r.rate / MB:.1f} MB/s",
                      f"{100 * ideal / r.seconds:.0f} %", vs,
                      " / ".join(str(r.files.get(n, 0)) for n in (*FAST, SLOW))])
    lines = [
        f"Three XRootD destinations in one pool on the local grid, throttled with the XRootD "
        f"throttle plugin: fast1 and fast2 at {args.rate / MB:g} MB/s, slow at "
        f"{args.rate / args.slow_factor / MB:g} MB/s (1/{args.slow_factor:g}); streams 1; "
        f"{args.files} files of {args.size / MB:g} MB from local disk; adler32 verified at "
        f"both ends; retries on.", "",
        f"Capacities measured in the same run (same mover and checks, all three endpoints "
        f"loaded at once, {args.cap_sessions} sessions each, transfers started after a "
        f"{args.cap_warmup:g} s warm-up; sum of the sessions' rates): "
        + ", ".join(f"{n} {c / MB:.1f} MB/s" for n, c in caps.items())
        + f". Ideal = total bytes / sum of capacities = {total / ideal / MB:.1f} MB/s, "
          f"makespan {ideal:.1f} s.", "",
        md_table(["selector", "concurrency", "state", "makespan", "aggregate", "of ideal",
                  "x DNS round-robin", "files fast1 / fast2 / slow"], table), ""]
    for r in rows:
        if r.optimizer != "fixed" and r.decisions:
            lines += ["Adaptive optimizer decisions in the last run (seconds since the first "
                      "transfer: cap, reason): " + "; ".join(
                          f"{t:g} s: {cap} ({why})" for t, cap, why in r.decisions) + ".", ""]
    lines += ["The XRootD throttle lets a server that was idle burst above its rate for a moment; "
              "a short campaign profits from that while the capacities are steady-state rates, "
              "so a row can exceed 100 % of the ideal.", ""]
    ok = bool(ta and ta.state == "done" and rrs)
    goals = []
    if ta:
        goals.append(Goal("throughput-aware aggregate >= 90 % of the ideal",
                          100 * ideal / ta.seconds, 90.0, unit=" %"))
        for r in rrs:
            what = "round-robin" + (" with exclusions" if r.exclusions else " (DNS alias)")
            goals.append(Goal(f"throughput-aware >= 1.5x {what}",
                              ta.rate / r.rate if r.rate else 0.0, 1.5, unit="x"))
    ok = ok and all(g.met for g in goals)
    lines += [g.line() for g in goals]
    figures = {
        "capacities_mb_per_s": {n: c / MB for n, c in caps.items()},
        "ideal_mb_per_s": total / ideal / MB, "ideal_makespan_s": ideal,
        "rows": [{"selector": r.selector, "exclusions": r.exclusions,
                  "concurrency": (f"fixed {args.max_active}" if r.optimizer == "fixed"
                                  else f"adaptive 1..{args.max_active}"),
                  "state": r.state, "makespan_s": r.seconds, "mb_per_s": r.rate / MB,
                  "pct_of_ideal": 100 * ideal / r.seconds if r.seconds else None,
                  "x_dns_round_robin": r.rate / dns.rate if dns and dns.rate > 0 else None,
                  "files": {n: r.files.get(n, 0) for n in (*FAST, SLOW)}} for r in rows],
        "decisions": [list(d) for r in rows if r.optimizer != "fixed" for d in r.decisions]}
    return "\n".join(lines) + "\n", goals, figures, ok
