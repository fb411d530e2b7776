"""Normalised comparison and ethtool output parsing (real ethtool 6.1 text formats)."""
from __future__ import annotations

from gridxfer.tuning.rules import check_nic, check_sysctl
from gridxfer.tuning.settings import nic_key, normalise, parse_ethtool, same, split_nic_key

RING = """Ring parameters for eth0:
Pre-set maximums:
RX:\t\t4096
RX Mini:\tn/a
RX Jumbo:\tn/a
TX:\t\t4096
Current hardware settings:
RX:\t\t512
RX Mini:\tn/a
RX Jumbo:\tn/a
TX:\t\t1024
RX Buf Len:\t\tn/a
"""
PAUSE = """Pause parameters for eth0:
Autonegotiate:\ton
RX:\t\toff
TX:\t\toff
"""
COALESCE = """Coalesce parameters for eth0:
Adaptive RX: on  TX: off
stats-block-usecs: n/a
rx-usecs: 3
rx-frames: n/a
tx-usecs: 0
"""


def test_normalise_splits_whitespace_and_makes_ints():
    assert normalise("4096\t87380\t16777216") == (4096, 87380, 16777216)
    assert same("4096\t87380\t16777216", "4096 87380   16777216")
    assert not same("4096 87380 16777216", "4096 87380 16777217")
    assert same("BBR", "bbr") and not same("1", None) and normalise(None) is None
    assert same("010", "10")


def test_nic_keys_round_trip():
    key = nic_key("eth0.100", "ring.rx")
    assert key == "nic[eth0.100].ring.rx" and split_nic_key(key) == ("eth0.100", "ring.rx")
    assert split_nic_key("net.ipv4.tcp_rmem") is None


def test_parse_ethtool_current_values_only():
    assert parse_ethtool("ring", RING) == {"rx": "512", "tx": "1024"}
    assert parse_ethtool("pause", PAUSE) == {"autoneg": "on", "rx": "off", "tx": "off"}
    assert parse_ethtool("coalesce", COALESCE) == {"adaptive-rx": "on", "adaptive-tx": "off",
                                                   "rx-usecs": "3", "tx-usecs": "0"}


def test_static_rules():
    assert check_sysctl("net.ipv4.tcp_rmem", "4096 87380 16777216") is None
    assert "non-decreasing" in check_sysctl("net.ipv4.tcp_rmem", "4096 87380 1024")
    assert "out of range" in check_sysctl("net.ipv4.tcp_sack", "3")
    assert check_sysctl("vm.swappiness", "10") is None          # unlisted keys: the kernel decides
    assert "not a sysctl key" in check_sysctl("net/../etc", "1")
    assert check_nic("pause.rx", "on") is None and "unknown NIC" in check_nic("speed", "1000")
    assert "out of range" in check_nic("mtu", "67")


import pytest  # noqa: E402

from gridxfer.errors import UsageError  # noqa: E402


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "eth0:1", "eth 0", "e\n", "e\u202e",
                                  "x" * 16, "\u00e9" * 8])
def test_a_name_no_interface_can_have_is_refused_before_any_read(name):
    """`ip link show dev ''` answers for the first interface: --iface '' read and set
    another device's settings (and '..', '/' or ':' reached ip and ethtool)."""
    with pytest.raises(UsageError, match="not an interface name"):
        nic_key(name, "mtu")


@pytest.mark.parametrize("name", ["eth0", "lo", "enp0s31f6", "bond0.100", "x" * 15, "veth-gx_1"])
def test_interface_names_the_kernel_takes_are_kept(name):
    assert split_nic_key(nic_key(name, "mtu")) == (name, "mtu")


def test_the_cli_refuses_a_bad_iface_in_one_line_exit_2(capsys, gridxfer_home):
    from gridxfer.cli.main import main
    assert main(["tune", "verify", "dtn-10g", "--iface", ""]) == 2
    err = capsys.readouterr().err
    assert "not an interface name" in err and len(err.strip().splitlines()) == 1
