"""bench.emulator: its topology is a valid grid and `make bench` runs it."""
from __future__ import annotations

from bench import __main__ as suite
from bench import emulator
from gridxfer.testbed.topology import load


def test_the_emulator_topology_loads_and_is_in_the_suite(tmp_path):
    path = tmp_path / "bemu.yaml"
    path.write_text(emulator.TOPOLOGY)
    topo = load(path)
    assert {h.name for h in topo.hosts} == {"a1", "a2", "b1", "c1", "d1", "e1", "f1"}
    assert [(lk.rtt_s, lk.loss) for lk in topo.links] == [(0.02, 0.0), (0.01, 0.01),
                                                           (0.0, 0.0), (0.02, 0.0)]
    entry = {e.name: e for e in suite.SUITE}["emulator"]
    assert entry.needs_netns and entry.command.endswith("-m bench.emulator")
