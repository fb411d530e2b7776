"""Run every benchmark in turn: `python -m bench [NAME ...]`.

Each benchmark is a module ``bench.<name>`` with ``main(argv) -> int``; it measures
gridxfer and its real peers in the same run, prints ratios, and appends its result
with the command to BENCHMARKS.md.
"""
from __future__ import annotations

import importlib
import sys

BENCHMARKS = ["blackhole", "bulk", "smallfiles", "scale"]


def main(argv: list[str]) -> int:
    names = argv or BENCHMARKS
    worst = 0
    for name in names:
        print(f"=== bench.{name} ===", flush=True)
        try:
            module = importlib.import_module(f"bench.{name}")
        except ModuleNotFoundError as exc:
            print(f"bench.{name}: not available ({exc})")
            worst = max(worst, 1)
            continue
        worst = max(worst, int(module.main([]) or 0))
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
