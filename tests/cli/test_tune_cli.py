"""`gridxfer tune` in-process: malformed profiles and arguments exit 2 with one line naming
file:line or the key, and nothing is written; JSON keys are pinned."""
from __future__ import annotations

import json
import os

import pytest

from gridxfer.cli.main import main
from gridxfer.tuning.testing import scratch_netns

PER_NS = ["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_mtu_probing",
          "net.ipv4.tcp_sack", "net.ipv4.tcp_congestion_control", "net.ipv4.tcp_timestamps"]

# (name, conf text, nic text or None, expected fragment of the one-line error)
BAD_PROFILES = [
    ("no-equals", "net.ipv4.tcp_sack 0\n", None, "bad.conf:1: expected 'key = value'"),
    ("empty-value", "net.ipv4.tcp_sack =\n", None, "bad.conf:1: net.ipv4.tcp_sack: empty value"),
    ("non-numeric", "net.ipv4.tcp_mtu_probing = 1\nnet.core.rmem_max = lots\n", None,
     "bad.conf:2: net.core.rmem_max: not numeric"),
    ("two-numbers", "net.ipv4.tcp_rmem = 4096 87380\n", None,
     "bad.conf:1: net.ipv4.tcp_rmem: expected 3"),
    ("decreasing", "net.ipv4.tcp_wmem = 4096 65536 1024\n", None,
     "bad.conf:1: net.ipv4.tcp_wmem: values must be non-decreasing"),
    ("out-of-range", "net.ipv4.tcp_sack = 2\n", None,
     "bad.conf:1: net.ipv4.tcp_sack: 2 out of range"),
    ("negative", "\n\nnet.core.wmem_max = -5\n", None,
     "bad.conf:3: net.core.wmem_max: -5 out of range"),
    ("too-big", "net.core.rmem_max = 4294967296\n", None,
     "bad.conf:1: net.core.rmem_max: 4294967296 out of range"),
    ("duplicate", "net.ipv4.tcp_sack = 0\nnet.ipv4.tcp_sack = 1\n", None,
     "bad.conf:2: net.ipv4.tcp_sack: duplicate"),
    ("bad-key", "net..ipv4 = 1\n", None, "bad.conf:1: net..ipv4: not a sysctl key"),
    ("qdisc", "net.core.default_qdisc = turbo\n", None,
     "bad.conf:1: net.core.default_qdisc: 'turbo' is not one of"),
    ("missing-include", "# include: no-such-profile-gx\nnet.ipv4.tcp_sack = 0\n", None,
     "bad.conf:1: unknown profile 'no-such-profile-gx'"),
    ("nic-unknown", "net.ipv4.tcp_sack = 0\n", "txqueuelen = 10\nturbo = on\n",
     "bad.nic:2: turbo: unknown NIC setting"),
    ("nic-mtu", "net.ipv4.tcp_sack = 0\n", "mtu = 20\n", "bad.nic:1: mtu: 20 out of range"),
    ("nic-pause", "net.ipv4.tcp_sack = 0\n", "pause.rx = maybe\n",
     "bad.nic:1: pause.rx: 'maybe' is not one of"),
    ("jinja", "net.ipv4.tcp_sack = 0\nkernel.x = {{ lookup('pipe','touch /tmp/gx-pwned') }}\n",
     None, "bad.conf:2: kernel.x: value contains '{{'"),
    ("nul", "net.ipv4.tcp_sack = 0\x00\n", None, "bad.conf:1: control character U+0000"),
    ("not-utf8", "net.ipv4.tcp_sack = 0\n\udce9\n", None, "bad.conf:2: not UTF-8"),
    ("huge", "net.core.rmem_max = " + "9" * 400 + "\n", None,
     "bad.conf:1: net.core.rmem_max: 999999999999..."),
    # caught against the target, before anything is written: the key is named
    ("unknown-key", "net.ipv4.tcp_sack = 0\nnet.ipv4.tcp_no_such_key_gx = 1\n", None,
     "bad.conf:2: net.ipv4.tcp_no_such_key_gx = 1: no such sysctl"),
    ("congestion", "net.ipv4.tcp_sack = 0\nnet.ipv4.tcp_congestion_control = warp\n", None,
     "net.ipv4.tcp_congestion_control = warp: 'warp' not in tcp_available_congestion_control"),
    ("global-in-ns", "net.ipv4.tcp_sack = 0\nnet.core.rmem_max = 67108864\n", None,
     "global-only key(s) belong to the whole host, not to this network namespace: "
     "net.core.rmem_max (bad.conf:2); use --skip-global"),
    ("tcp-mem-in-ns", "net.ipv4.tcp_sack = 0\nnet.ipv4.tcp_mem = 100 200 300\n", None,
     "net.ipv4.tcp_mem (bad.conf:2); use --skip-global"),
    ("host-wide-in-ns", "net.ipv4.tcp_sack = 0\nvm.swappiness = 13\nfs.file-max = 99999\n", None,
     "2 global-only key(s) belong to the whole host, not to this network namespace: "
     "vm.swappiness (bad.conf:2), fs.file-max (bad.conf:3); use --skip-global"),
]

BAD_ARGS = [
    (["tune", "apply", "dtn-10g", "--host", "ssh:"], "expected ssh:[USER@]HOST[:PORT]"),
    (["tune", "apply", "dtn-10g", "--host", "ssh:root@h:99999"], "port out of range"),
    (["tune", "apply", "dtn-10g", "--host", "telnet:se01"], "unknown kind 'telnet'"),
    (["tune", "apply", "dtn-10g", "--host", "netns:gxtune-does-not-exist"], "no network namespace"),
    (["tune", "apply", "dtn-10g", "--host", "se01"], "needs --inventory"),
    (["tune", "apply", "no-such-profile-gx"], "unknown profile 'no-such-profile-gx'"),
    (["tune", "show", "../etc/passwd"], "no such profile file"),
    (["tune", "advise", "--bandwidth", "fast", "--rtt", "18ms"], "not a bit rate: 'fast'"),
    (["tune", "advise", "--bandwidth", "1G", "--rtt", "soon"], "not a duration: 'soon'"),
    (["tune", "advise", "--bandwidth", "1G", "--rtt", "18ms", "--streams", "0"],
     "Invalid value for '--streams': 0 is below 1"),
    (["tune", "advise", "--bandwidth", "1G", "--rtt", "18ms", "--write-profile", "x.txt"],
     "Invalid value for '--write-profile': x.txt: must end in .conf"),
    (["tune", "plan", "--rate", "lots"], "not a byte rate: 'lots'"),
    (["tune", "plan", "--rate", "0MB/s"],
     "Invalid value for '--rate': '0MB/s': must be more than 0"),
    (["tune", "plan", "--rate", "200MB/s", "--tape-drive-rate", "20-15MB/s"], "low > high"),
    (["tune", "plan", "--rate", "200MB/s", "--buffer", "big"], "not a size: 'big'"),
]


@pytest.fixture(scope="module")
def nsname():
    if os.geteuid() != 0:
        pytest.skip("needs root")
    with scratch_netns() as ns:
        yield ns


def snap(ns):
    return {k: ns.sysctl(k) for k in PER_NS}


@pytest.mark.root
@pytest.mark.parametrize("name,conf,nic,fragment", BAD_PROFILES, ids=[b[0] for b in BAD_PROFILES])
def test_malformed_profile_exits_2_with_one_line_and_writes_nothing(
        nsname, tmp_path, gridxfer_home, capsys, name, conf, nic, fragment, monkeypatch):
    monkeypatch.setenv("GRIDXFER_SYSCTL_DIR", str(tmp_path / "sysctl.d"))
    (tmp_path / "bad.conf").write_text(conf, errors="surrogateescape")
    if nic is not None:
        (tmp_path / "bad.nic").write_text(nic)
    before = snap(nsname)
    code = main(["tune", "apply", str(tmp_path / "bad.conf"), "--host", f"netns:{nsname.name}",
                 "--iface", nsname.ns_if, "--persist"])
    err = capsys.readouterr().err.strip().replace(f"{tmp_path}/", "")
    assert code == 2, err
    assert len(err.splitlines()) == 1 and fragment in err, err
    assert snap(nsname) == before
    assert not list(gridxfer_home.glob("tuning/*.json"))     # no saved state
    assert not (tmp_path / "sysctl.d").exists()


@pytest.mark.parametrize("argv,fragment", BAD_ARGS,
                         ids=[" ".join(a[1:3]) + str(i) for i, (a, _) in enumerate(BAD_ARGS)])
def test_malformed_arguments_exit_2_with_one_line(gridxfer_home, capsys, tmp_path, monkeypatch,
                                                  argv, fragment):
    monkeypatch.chdir(tmp_path)
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and fragment in err, err
    assert list(tmp_path.iterdir()) == [] or all(p.name == "gxhome" for p in tmp_path.iterdir())


def test_include_cycle_names_the_file(tmp_path, capsys):
    (tmp_path / "a.conf").write_text("# include: b\nnet.ipv4.tcp_sack = 0\n")
    (tmp_path / "b.conf").write_text("# include: a\nnet.ipv4.tcp_sack = 1\n")
    assert main(["tune", "show", str(tmp_path / "a.conf")]) == 2
    err = capsys.readouterr().err.strip()
    assert "include cycle: a -> b -> a" in err and len(err.splitlines()) == 1


def test_list_and_show_json(capsys):
    assert main(["tune", "list", "--json"]) == 0
    names = {p["name"] for p in json.loads(capsys.readouterr().out)}
    assert {"cnaf-sc-wan-1g", "lan-10ge-jumbo", "daq-udp-lossless", "dtn-10g", "dtn-40g",
            "dtn-100g", "untuned-legacy"} <= names
    assert main(["tune", "show", "dtn-100g", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) >= {"name", "path", "source", "intent", "includes", "settings"}
    # bundled profiles are flat: sysctl -p follows no include
    assert data["includes"] == []


def test_advise_shows_the_sc_arithmetic_and_writes_a_profile(tmp_path, capsys):
    out_conf = tmp_path / "sc-advised.conf"
    assert main(["tune", "advise", "--bandwidth", "1G", "--rtt", "18.2ms",
                 "--write-profile", str(out_conf), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert (
        "2,275,000 bytes ~ 2.3 MB" in text and "2.75-3 MB" in text and "doubles SO_RCVBUF" in text
    )
    assert not out_conf.exists()
    assert main(["tune", "advise", "--bandwidth", "1G", "--rtt", "18.2ms", "--streams", "4",
                 "--write-profile", str(out_conf)]) == 0
    assert "per stream: 2,275,000 / 4 streams" in capsys.readouterr().out
    assert main(["tune", "show", str(out_conf), "--json"]) == 0       # a loadable profile
    settings = {s["key"]: s["value"] for s in json.loads(capsys.readouterr().out)["settings"]}
    assert settings["net.core.rmem_max"] == "2097152"


@pytest.mark.parametrize("bandwidth,rtt,message", [
    ("10", "18ms", "'--bandwidth': 10: a number needs its unit, e.g. 10Gbit/s"),
    ("10Gbit/s", "18", "'--rtt': 18: a number needs its unit, e.g. 18ms"),
    ("10", "18", "'--bandwidth': 10: a number needs its unit"),
    ("1e10", "18ms", "'--bandwidth': 1e10: a number needs its unit"),
    ("10Gbit/s", " 0.018 ", "'--rtt': 0.018: a number needs its unit"),
])
def test_advise_refuses_numbers_without_units(capsys, bandwidth, rtt, message):
    """`--bandwidth 10 --rtt 18` meant 10 bit/s and 18 s, and advised a maximum buffer below
    the kernel's default. Now: exit 2, one line that shows the accepted form."""
    assert main(["tune", "advise", "--bandwidth", bandwidth, "--rtt", rtt]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and message in err and not captured.out, err


def test_advise_with_units(capsys):
    assert main(["tune", "advise", "--bandwidth", "10Gbit/s", "--rtt", "18ms", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["bandwidth_bps"] == 10e9 and data["rtt_s"] == pytest.approx(0.018)
    assert data["bdp_bytes"] == 22_500_000


def test_plan_json(capsys):
    assert main(["tune", "plan", "--rate", "200MB/s", "--tape-drive-rate", "15-20MB/s",
                 "--tape-target", "60MB/s", "--buffer", "50TB", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["required_rate"] == 1200e6 and data["link_gbps"] == 10
    assert data["drives"] == [3, 4]
    assert round(data["fill_s"]) == 357143
