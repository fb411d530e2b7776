"""The demo's namespace probe (testbed/demo.py) is its own: another demo's probe, or a
namespace left under the old fixed name, never makes it fall back to the loopback grid."""
from __future__ import annotations

import os
import subprocess

import pytest

from gridxfer.testbed import demo, netgrid

pytestmark = [pytest.mark.root, pytest.mark.integration]


def _netns() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def test_probe_is_tagged_and_never_collides(monkeypatch):
    if os.geteuid() != 0 or not demo.TOPOLOGY.exists():
        pytest.skip("needs root and the demo topology")
    monkeypatch.delenv("GRIDXFER_DEMO_LOCAL", raising=False)
    tag = netgrid.ns_tag()
    assert tag and f".{tag}-" in demo.probe_ns()
    others = ["gx-demo-probe", netgrid.ns_name("demo", f"probe{os.getpid() + 1}")]
    made = []
    try:
        for name in others:                     # a concurrent demo's probe, an old leftover
            if subprocess.run(["ip", "netns", "add", name], capture_output=True).returncode == 0:
                made.append(name)
        assert made == others
        assert demo.choose_layout() is demo.NETNS
        assert set(others) <= _netns() and demo.probe_ns() not in _netns()
    finally:
        for name in made:
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
