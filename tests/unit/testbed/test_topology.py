"""Topology YAML: the example parses; malformed files fail with file:line and the field."""
from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from gridxfer.errors import SpecError, UsageError
from gridxfer.testbed.topology import BENCH_NET, load, parse

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

GOOD = """\
name: tb
tiers:
  - name: T0
    hosts:
      - {name: t0-se01}
  - name: T1
    subnet: 198.19.7.0/24
    hosts:
      - {name: t1-se01, services: [xrootd]}
      - {name: t1-ui, role: client, rate: 100Mbit}
links:
  - {between: [T0, T1], rate: 1Gbit, rtt: 18ms, loss: 0.01%}
"""


def test_example_sc_topology():
    topo = load(EXAMPLES / "topology-sc.yaml")
    assert [t.name for t in topo.tiers] == ["T0", "T1-A", "T1-B"]
    assert [len(t.hosts) for t in topo.tiers] == [1, 2, 3]
    assert [h.name for h in topo.hosts if h.auth == "token"] == ["t1b-se02"]
    slow = [h for h in topo.hosts if h.rate_bps]
    assert [h.name for h in slow] == ["t1a-se02"]
    for link in topo.links:
        assert link.rtt_s == pytest.approx(0.018)
        assert link.rate_bps == 1e9
        assert link.loss == pytest.approx(0.0001)
    assert topo.controller == "T0"
    for h in topo.hosts:
        assert ipaddress.ip_address(h.address) in BENCH_NET
        assert h.services[:2] == ("xrootd", "gridftp") or h.services == ("xrootd-tape",)
    assert [h.name for h in topo.hosts if h.services == ("xrootd-tape",)] == ["t1b-tape01"]
    assert topo.host("t0-se01").services == ("xrootd", "gridftp", "sshd")


def test_example_wan20_topology():
    topo = load(EXAMPLES / "topology-wan20.yaml")
    assert topo.controller is None
    assert topo.link_between("B", "A").rtt_s == pytest.approx(0.020)


def test_defaults_and_addresses():
    topo = parse(GOOD, "g.yaml")
    assert topo.tier("T0").subnet == "198.18.1.0/24"
    assert topo.host("t0-se01").address == "198.18.1.10"
    assert topo.host("t1-se01").address == "198.19.7.10"
    assert topo.host("t1-ui").address == "198.19.7.11"
    assert topo.host("t1-ui").services == ()
    assert topo.host("t1-ui").rate_bps == 1e8
    assert topo.host("t1-se01").services == ("xrootd",)
    assert topo.controller == "T0"
    assert topo.controller_address() == "198.18.1.254"
    assert topo.link_between("T1", "T0").loss == pytest.approx(1e-4)
    assert topo.link_between("T0", "T0") is None
    with pytest.raises(UsageError, match="no host 'nope'"):
        topo.host("nope")


@pytest.mark.parametrize("old,new,line,field", [
    ("name: tb", "name: tb\nbogus: 1", 2, "bogus"),
    ("name: tb", "name: Not_OK", 1, "name"),
    ("  - name: T1\n", "  - name: T0\n", 6, "tiers[1].name"),                   # duplicate tier
    ("{name: t1-se01, services: [xrootd]}", "{name: t0-se01}", 9, "tiers[1].hosts[0].name"),
    ("{name: t0-se01}", "{name: t0-se01, address: 10.0.0.1}", 5, "tiers[0].hosts[0].address"),
    ("{name: t0-se01}", "{name: t0-se01, address: 198.18.9.1}", 5, "tiers[0].hosts[0].address"),
    ("subnet: 198.19.7.0/24", "subnet: 192.168.7.0/24", 7, "tiers[1].subnet"),
    ("subnet: 198.19.7.0/24", "subnet: 198.18.1.0/25", 7, "tiers[1].subnet"),     # overlap
    ("subnet: 198.19.7.0/24", "subnet: 198.18.0.0/24", 7, "tiers[1].subnet"),     # router addr
    ("subnet: 198.19.7.0/24", "subnet: 2001:db8::/64", 7, "tiers[1].subnet"),      # IPv6
    ("{name: t0-se01}", "{name: t0-se01, address: '2001:db8::1'}", 5, "tiers[0].hosts[0].address"),
    ("rate: 100Mbit}", "rate: fast}", 10, "tiers[1].hosts[1].rate"),
    ("role: client", "role: boss", 10, "tiers[1].hosts[1].role"),
    ("services: [xrootd]", "services: [httpd]", 9, "tiers[1].hosts[0].services"),
    ("{name: t0-se01}", "{name: router}", 5, "tiers[0].hosts[0].name"),
    ("services: [xrootd]}", "services: [xrootd], auth: gsi}", 9, "tiers[1].hosts[0].auth"),
    ("role: client,", "role: client, auth: token,", 10, "tiers[1].hosts[1].auth"),  # no xrootd
    ("{name: t0-se01}", "{name: t0-se01, colour: red}", 5, "tiers[0].hosts[0].colour"),
    ("between: [T0, T1]", "between: [T0, T9]", 12, "links[0].between"),
    ("between: [T0, T1]", "between: [T0, T0]", 12, "links[0].between"),
    ("rtt: 18ms", "rtt: soon", 12, "links[0].rtt"),
    ("rtt: 18ms", "rtt: 9s", 12, "links[0].rtt"),
    ("loss: 0.01%", "loss: 150%", 12, "links[0].loss"),
    ("loss: 0.01%", "loss: lots", 12, "links[0].loss"),
    ("rate: 1Gbit,", "rate: 10bit,", 12, "links[0].rate"),
    ("rate: 1Gbit,", "jitter: 1ms,", 12, "links[0].jitter"),
])
def test_malformed_topologies_name_file_line_and_field(old, new, line, field):
    assert old in GOOD
    with pytest.raises(SpecError) as info:
        parse(GOOD.replace(old, new, 1), "bad.yaml")
    err = info.value
    assert (err.path, err.line, err.field) == ("bad.yaml", line, field), str(err)
    assert str(err).startswith(f"bad.yaml:{line}: {field}: ")
    assert "\n" not in str(err)


def test_duplicate_link_and_missing_parts():
    doubled = GOOD + "  - {between: [T1, T0], rtt: 5ms}\n"
    with pytest.raises(SpecError, match=r"bad.yaml:13: links\[1\].between: duplicate link"):
        parse(doubled, "bad.yaml")
    with pytest.raises(SpecError, match="tiers: is required"):
        parse("name: x\n", "bad.yaml")
    with pytest.raises(SpecError, match="hosts: must be a non-empty list"):
        parse("name: x\ntiers:\n  - {name: A, hosts: []}\n", "bad.yaml")
    with pytest.raises(SpecError, match="controller: unknown tier"):
        parse(GOOD.replace("name: tb", "name: tb\ncontroller: T7"), "bad.yaml")


def test_not_yaml_and_unreadable(tmp_path):
    with pytest.raises(SpecError, match=r"bad.yaml:3: YAML syntax"):
        parse("name: x\ntiers: [\n", "bad.yaml")
    with pytest.raises(SpecError, match="must be a mapping"):
        parse("- just\n- a list\n", "bad.yaml")
    with pytest.raises(SpecError, match="cannot read"):
        load(tmp_path / "missing.yaml")
