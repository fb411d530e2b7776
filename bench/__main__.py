"""Run the benchmark suite of issue 7: `python -m bench` (what `make bench` runs).

    python -m bench            every benchmark, in the configurations BENCHMARKS.md reports
    python -m bench NAME ...   those only (bulk, bulk-wan, smallfiles, smallfiles-wan, scale,
                               blackhole, emulator, tape),
                               each with its suite arguments
    python -m bench --list     the suite: each entry's command line
    python -m bench --summary  the latest record of each entry's goals (from bench/results/),
                               to update BENCHMARKS.md from

Each benchmark is a module ``bench.<module>`` with ``main(argv) -> int``; it measures
gridxfer and its real peers in the same run, prints a markdown table and the goals, and
appends a record of the run (commit, date, machine, command, figures: ``bench.record``)
to bench/results/<entry>.jsonl. ``bulk-wan`` needs root with CAP_NET_ADMIN (it builds the
network-namespace testbed); without it the entry is skipped and says so.
"""
from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass

from bench import exit_on_sigterm


@dataclass(frozen=True)
class Entry:
    name: str
    module: str
    argv: tuple[str, ...] = ()
    needs_netns: bool = False

    @property
    def command(self) -> str:
        from bench.common import command_line
        return command_line(self.module, self.argv)


# The configurations BENCHMARKS.md reports: gridxfer with the campaign default of one stream
# per transfer (gfal-copy streams file <-> gsiftp on one connection whatever -n says; the
# peers keep -p/--streams 4), tools interleaved round by round, each tool's best round kept.
SUITE = (
    Entry("blackhole", "blackhole"),
    Entry("bulk", "bulk", ("--gx-streams", "1", "--rounds", "3")),
    Entry("bulk-wan", "bulk", ("--wan", "--gx-streams", "1", "--rounds", "3"), needs_netns=True),
    Entry("smallfiles", "smallfiles", ("--rounds", "3")),
    Entry("smallfiles-wan", "smallfiles", ("--wan", "--rounds", "3"), needs_netns=True),
    Entry("scale", "scale"),
    Entry("emulator", "emulator", needs_netns=True),
    Entry("tape", "tape"),
)


def netns_possible() -> bool:
    from gridxfer.testbed.netns import has_cap_net_admin
    return os.geteuid() == 0 and has_cap_net_admin()


def main(argv: list[str]) -> int:
    if argv[:1] == ["--summary"]:
        from bench.summary import render
        print(render(suite=SUITE), end="")
        return 0
    if argv[:1] == ["--list"]:
        for e in SUITE:
            print(
                f"{e.name:11s} {e.command}" + ("   (root, CAP_NET_ADMIN)" if e.needs_netns else "")
            )
        return 0
    known = {e.name: e for e in SUITE}
    unknown = [n for n in argv if n not in known]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join(known)}",
              file=sys.stderr)
        return 2
    worst = 0
    for entry in [known[n] for n in argv] or SUITE:
        print(f"=== {entry.name}: {entry.command} ===", flush=True)
        if entry.needs_netns and not netns_possible():
            print(f"{entry.name}: skipped: needs root with CAP_NET_ADMIN for the network-namespace "
                  "testbed (the loopback rows above still run)")
            worst = max(worst, 1)
            continue
        module = importlib.import_module(f"bench.{entry.module}")
        worst = max(worst, int(module.main(list(entry.argv)) or 0))
    return worst


if __name__ == "__main__":
    exit_on_sigterm()
    sys.exit(main(sys.argv[1:]))
