"""netgrid logic that needs no namespaces: the fallback without CAP_NET_ADMIN, and the
commands of a grid that is not up."""
from __future__ import annotations

from pathlib import Path

import pytest

from gridxfer.testbed import localgrid, netgrid, netns
from gridxfer.testbed.inventory import TestbedError

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "topology-sc.yaml"


def test_without_cap_net_admin_falls_back_to_the_local_grid(gridxfer_home, monkeypatch):
    monkeypatch.setattr(netns, "has_cap_net_admin", lambda: False)
    monkeypatch.setattr(localgrid, "up", lambda: "local-inventory")
    said: list[str] = []
    assert netgrid.up(EXAMPLE, notify=said.append) == "local-inventory"
    assert len(said) == 1 and "no CAP_NET_ADMIN" in said[0] and "loopback local grid" in said[0]
    assert not netgrid.state_path().exists()


def test_topology_errors_come_before_anything_is_built(gridxfer_home, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntiers:\n  - {name: A, hosts: [{name: a, address: 10.1.1.1}]}\n")
    with pytest.raises(Exception, match=r"bad.yaml:3: .*address"):
        netgrid.up(bad)
    assert not netgrid.state_path().exists()


def test_commands_of_a_grid_that_is_not_up(gridxfer_home):
    assert netgrid.status() == {"mode": "netns", "up": False}
    netgrid.down()                                     # idempotent, nothing to do
    with pytest.raises(TestbedError, match="no netns testbed is up"):
        netgrid.exec_in("t0-se01", ["true"])
    with pytest.raises(TestbedError, match="no netns testbed is up"):
        netgrid.hosts()


def test_namespace_names(monkeypatch):
    monkeypatch.delenv(netgrid.TAG_ENV, raising=False)
    assert netgrid.ns_name("sc", "t1a-se01") == "gx-sc-t1a-se01"
    assert netgrid.root_link_name("scscscscsc") == "gxc-scscscscsc"


def test_a_run_tag_makes_every_name_of_the_grid_its_own(monkeypatch):
    """Two test runs at once build the same topologies: with GRIDXFER_NS_TAG their
    namespaces and root-namespace links differ, and one run's prefix never matches the
    other's names (cleanup assertions and `down` touch only their own)."""
    monkeypatch.setenv(netgrid.TAG_ENV, "4194304")
    assert netgrid.ns_name("sc", "t1a-se01") == "gx-sc.4194304-t1a-se01"
    link = netgrid.root_link_name("scscscscsc")
    assert len(link) <= 15 and link.startswith("gxt")           # IFNAMSIZ
    mine = netgrid.ns_prefix("sc")
    monkeypatch.setenv(netgrid.TAG_ENV, "41943")
    assert netgrid.root_link_name("scscscscsc") != link
    assert not netgrid.ns_name("sc", "h").startswith(mine)
    assert not mine.startswith(netgrid.ns_prefix("sc"))
    monkeypatch.delenv(netgrid.TAG_ENV)
    assert not netgrid.ns_name("sc", "h").startswith(mine)


@pytest.mark.parametrize("bad", ["UPPER", "a-b", "123456789", "a/b", " "])
def test_a_bad_run_tag_is_a_usage_error(monkeypatch, bad):
    from gridxfer.errors import UsageError
    monkeypatch.setenv(netgrid.TAG_ENV, bad)
    with pytest.raises(UsageError, match="GRIDXFER_NS_TAG"):
        netgrid.ns_name("sc", "h")


def test_wan_link_method_and_netem_arguments(monkeypatch):
    from gridxfer.testbed import wanlink
    from gridxfer.testbed.topology import Link
    lossy = Link("A", "B", 1e9, 0.018, 0.0001)
    plain = Link("A", "B", 3e8, 0.0, 0.0)
    monkeypatch.delenv(wanlink.FORCE_ENV, raising=False)
    assert wanlink.method_for(lossy, netem=False) == "delayline"
    assert wanlink.method_for(lossy, netem=True) == "netem"
    assert wanlink.method_for(plain, netem=False) == "veth"
    monkeypatch.setenv(wanlink.FORCE_ENV, "delayline")
    assert wanlink.method_for(lossy, netem=True) == "delayline"
    assert wanlink.netem_args(lossy) == ["netem", "delay", "9000us", "limit", "100000",
                                         "loss", "0.01%"]
    assert wanlink.netem_args(Link("A", "B", None, 0.02, 0.0))[:3] == ["netem", "delay", "10000us"]


def test_status_lines_render_hosts_links_servers_and_dead_processes():
    st = {"up": False, "name": "sc", "topology": "/x/sc.yaml", "controller": "198.18.1.254",
          "hosts": {"t0": {"tier": "T0", "address": "198.18.1.10", "netns": "gx-sc-t0"}},
          "links": [{"from": "T0", "to": "T1", "rtt_s": 0.018, "rate_bps": 1e9, "loss": 1e-4,
                     "method": "delayline", "dev": "tl0a"}],
          "processes": {"delayline-tl0a": False},
          "endpoints": {"t0-xrd": {"alive": True, "pid": 7, "url": "root://198.18.1.10:1094//data/"}},
          "ssh": {"t0": {"key": "/k", "known_hosts": "/kh", "user": "root", "host": "198.18.1.10"}}}
    text = "\n".join(netgrid.status_lines(st))
    assert "'sc': DEGRADED" in text
    assert "host t0" in text and "198.18.1.10" in text and "gx-sc-t0" in text
    assert "link T0 -> T1: 18 ms RTT, 1000 Mbit/s, loss 0.01 % (delayline tl0a)" in text
    assert "DEAD delayline-tl0a" in text
    assert "t0-xrd" in text and "running" in text
    assert "ssh -i /k -o UserKnownHostsFile=/kh root@198.18.1.10" in text
    assert netgrid.status_lines({"mode": "netns", "up": False}) == ["no netns testbed is up"]


def test_ansible_inventory_groups_by_tier_with_strict_host_keys():
    from gridxfer.testbed.netservices import ansible_inventory
    ssh = {"t1a-se01": {"host": "198.18.2.10", "port": 22, "user": "root", "key": "/k",
                        "known_hosts": "/kh"},
           "t0-se01": {"host": "198.18.1.10", "port": 22, "user": "root", "key": "/k",
                       "known_hosts": "/kh"}}
    text = ansible_inventory(ssh, {"t1a-se01": "T1-A", "t0-se01": "T0"})
    lines = text.splitlines()
    assert lines.index("[T0]") < lines.index("[T1_A]")
    t1 = lines[lines.index("[T1_A]") + 1]
    assert t1.startswith("t1a-se01 ansible_host=198.18.2.10 ansible_port=22 ansible_user=root")
    assert "ansible_ssh_private_key_file=/k" in t1
    assert "-o UserKnownHostsFile=/kh -o StrictHostKeyChecking=yes'" in t1
