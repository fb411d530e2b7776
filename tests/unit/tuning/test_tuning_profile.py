"""Profile parsing: sysctl.d format, header, includes, NIC files, the bundled profiles."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from gridxfer.errors import SpecError, UsageError
from gridxfer.tuning.profile import list_profiles, load_profile, render_sysctl_d

SYSCTL_D_LINE = re.compile(r"\s*(#.*|;.*|-?[a-z0-9_.\-/]+\s*=\s*\S.*)?\s*", re.I)


def test_bundled_profiles_are_plain_sysctl_d_with_a_header():
    names = {p.stem for p in list_profiles()}
    assert {"cnaf-sc-wan-1g", "lan-10ge-jumbo", "daq-udp-lossless", "dtn-10g", "dtn-40g",
            "dtn-100g", "untuned-legacy"} <= names
    for path in list_profiles():
        for no, line in enumerate(path.read_text().splitlines(), 1):
            assert SYSCTL_D_LINE.fullmatch(line), f"{path}:{no}: {line!r}"
        prof = load_profile(path.stem)
        assert prof.source and prof.intent, path


# The service challenge's table as FIELD-NOTES.md quotes it, line for line and in order.
SC_TABLE = """\
net.ipv4.ip_forward = 0
net.ipv4.conf.default.rp_filter = 1
kernel.sysrq = 0
kernel.core_uses_pid = 1
net.ipv4.tcp_timestamps = 0
net.ipv4.tcp_sack = 0
net.ipv4.tcp_rmem = 1048576 16777216 33554432
net.ipv4.tcp_wmem = 1048576 16777216 33554432
net.ipv4.tcp_mem = 1048576 16777216 33554432
net.core.rmem_max = 16777215
net.core.wmem_max = 16777215
net.core.rmem_default = 4194303
net.core.wmem_default = 4194303
net.core.optmem_max = 4194303
net.core.netdev_max_backlog = 100000
"""


def test_cnaf_sc_table_exactly():
    p = load_profile("cnaf-sc-wan-1g")
    assert [f"{s.key} = {s.value}" for s in p.sysctl] == SC_TABLE.splitlines()
    assert [(s.key, s.value) for s in p.nic] == [("nic.txqueuelen", "10000")]
    assert "2005" in p.source and "CNAF" in p.source
    text = Path(p.path).read_text()
    # the comment says what a modern kernel does differently, and the tcp_mem page caveat
    for fragment in ("modern kernel", "tcp_timestamps = 0 and tcp_sack = 0", "pages", "128 GiB",
                     "autotuning", "host hardening"):
        assert fragment in text, fragment


def test_modern_profile_for_the_same_link():
    m = {s.key: s.value for s in load_profile("wan-1g-18ms-modern").settings}
    assert m["net.ipv4.tcp_sack"] == m["net.ipv4.tcp_timestamps"] == "1"
    assert "net.ipv4.tcp_mem" not in m and "kernel.sysrq" not in m
    assert int(m["net.ipv4.tcp_rmem"].split()[2]) >= 8 * 2**20     # >= tune advise's maximum


def test_daq_follows_the_lhcb_figures():
    daq = {s.key: s.value for s in load_profile("daq-udp-lossless").settings}
    assert daq == {
        "net.core.rmem_default": "1048576", "net.core.rmem_max": "1048576",
        "net.core.wmem_default": "524288", "net.core.wmem_max": "524288",
        "net.ipv4.conf.all.arp_filter": "1",
        "nic.ring.rx": "4096", "nic.ring.tx": "4096", "nic.txqueuelen": "1600",
        "nic.pause.autoneg": "off", "nic.pause.rx": "on", "nic.pause.tx": "on"}


# ESnet fasterdata, https://fasterdata.es.net/host-tuning/linux/ (and .../100g-tuning/)
FASTERDATA = {
    "dtn-10g": ("67108864", "4096 87380 33554432", "4096 65536 33554432", "30000"),
    "dtn-40g": ("134217728", "4096 87380 67108864", "4096 65536 67108864", "250000"),
    "dtn-100g": ("2147483647", "4096 67108864 1073741824", "4096 67108864 1073741824", "250000"),
}


@pytest.mark.parametrize("name", sorted(FASTERDATA))
def test_dtn_profiles_carry_fasterdata_values(name):
    p = load_profile(name)
    v = {s.key: s.value for s in p.settings}
    bufmax, rmem, wmem, backlog = FASTERDATA[name]
    assert v["net.core.rmem_max"] == v["net.core.wmem_max"] == bufmax
    assert (v["net.ipv4.tcp_rmem"], v["net.ipv4.tcp_wmem"]) == (rmem, wmem)
    assert v["net.core.netdev_max_backlog"] == backlog
    assert v["net.ipv4.tcp_mtu_probing"] == "1" and v["net.core.default_qdisc"] == "fq"
    assert v["net.ipv4.tcp_congestion_control"] in ("bbr", "htcp")
    assert (v["nic.txqueuelen"], v["nic.mtu"]) == ("10000", "9000")
    assert "https://fasterdata.es.net/host-tuning/linux/" in p.source


def test_other_bundled_values():
    lan = {s.key: s.value for s in load_profile("lan-10ge-jumbo").settings}
    assert lan["net.core.rmem_max"] == str(32 * 2**20) and lan["nic.mtu"] == "9216"
    assert lan["net.core.netdev_max_backlog"] == lan["nic.txqueuelen"] == "100000"
    legacy = {s.key: s.value for s in load_profile("untuned-legacy").settings}
    assert int(legacy["net.ipv4.tcp_rmem"].split()[2]) < 256 * 1024


SOURCE_CITED = re.compile(r"https?://\S+|\((?:[A-Za-z ]+, )?(?:19|20)\d\d\)")


def test_bundled_files_need_nothing_sysctl_p_ignores():
    """`sysctl -p FILE` (procps) follows no `# include:` and does not honour the '-' prefix
    (it reports the failure and exits 1), so no bundled profile relies on either, and each
    cites its source in the header."""
    for path in list_profiles():
        text = path.read_text()
        assert not re.search(r"^\s*#\s*include\s*:", text, re.M | re.I), path
        assert not re.search(r"^\s*-", text, re.M), path
        prof = load_profile(str(path))
        assert prof.includes == () and SOURCE_CITED.search(prof.source), path
        assert f"sysctl -p {path.name}" in prof.intent, path
        nic = path.with_suffix(".nic")
        if nic.exists():
            assert "Not a sysctl file" in nic.read_text() or "not sysctl" in nic.read_text(), nic


def test_includes_override_in_place_and_remember_origin(tmp_path):
    (tmp_path / "base.conf").write_text("net.ipv4.tcp_rmem = 4096 87380 33554432\n"
                                        "net.ipv4.tcp_congestion_control = bbr\n")
    (tmp_path / "base.nic").write_text("txqueuelen = 10000\n")
    (tmp_path / "mid.conf").write_text("# include: base\nnet.core.netdev_max_backlog = 250000\n")
    (tmp_path / "top.conf").write_text(
        "# include: mid\nnet.ipv4.tcp_rmem = 4096 67108864 1073741824\n"
    )
    p = load_profile(str(tmp_path / "top.conf"))
    assert p.includes == ("mid",)
    rmem = p.get("net.ipv4.tcp_rmem")
    assert rmem.value == "4096 67108864 1073741824" and rmem.path.endswith("top.conf")
    cc = p.get("net.ipv4.tcp_congestion_control")
    assert cc.path.endswith("base.conf") and cc.line > 0         # from two levels down
    assert p.get("net.core.netdev_max_backlog").value == "250000"
    assert p.get("nic.txqueuelen").value == "10000"              # NIC settings included too


def test_local_include_and_profile_path(tmp_path, monkeypatch):
    (tmp_path / "base.conf").write_text("net.ipv4.tcp_sack = 1\nnet.ipv4.tcp_mtu_probing = 1\n")
    (tmp_path / "top.conf").write_text("# source: t\n# intent: first\n#    second line\n"
                                       "# include: base\nnet.ipv4.tcp_sack = 0\n")
    p = load_profile(str(tmp_path / "top.conf"))
    assert [(s.key, s.value) for s in p.settings] == [("net.ipv4.tcp_sack", "0"),
                                                     ("net.ipv4.tcp_mtu_probing", "1")]
    assert p.intent == "first second line"
    monkeypatch.setenv("GRIDXFER_PROFILE_PATH", str(tmp_path))
    assert load_profile("top").path == str(tmp_path / "top.conf")


def test_values_are_whitespace_normalised_and_optional_marked(tmp_path):
    (tmp_path / "x.conf").write_text("net.ipv4.tcp_rmem=4096\t87380   8388608\n"
                                     " - net.core.default_qdisc = fq\n")
    p = load_profile(str(tmp_path / "x.conf"))
    assert p.get("net.ipv4.tcp_rmem").value == "4096 87380 8388608"
    assert p.get("net.core.default_qdisc").optional
    text = render_sysctl_d(p)
    assert "net.ipv4.tcp_rmem = 4096 87380 8388608\n-net.core.default_qdisc = fq\n" in text


def test_errors_name_file_and_line(tmp_path):
    (tmp_path / "x.conf").write_text("# fine\nnet.ipv4.tcp_sack = 0\nnet.ipv4.tcp_rmem = 1 2\n")
    with pytest.raises(SpecError) as err:
        load_profile(str(tmp_path / "x.conf"))
    assert str(err.value).startswith(f"{tmp_path / 'x.conf'}:3: net.ipv4.tcp_rmem:")
    assert err.value.line == 3 and err.value.exit_code == 2


def test_unknown_names(tmp_path):
    with pytest.raises(UsageError, match="unknown profile"):
        load_profile("nope-gx")
    with pytest.raises(UsageError, match="not a profile name"):
        load_profile("bad name!")
    (tmp_path / "bin.conf").write_bytes(b"\xff\xfe")
    with pytest.raises(SpecError, match="not UTF-8"):
        load_profile(str(tmp_path / "bin.conf"))


@pytest.mark.parametrize("body,where,fragment", [
    ("net.ipv4.tcp_sack = 0\nkernel.core_pattern = {{ lookup('pipe','id') }}\n", 2, "'{{'"),
    ("net.ipv4.tcp_sack = {% if 1 %}0{% endif %}\n", 1, "'{%'"),
    ("net.ipv4.tcp_sack = 0 {# hidden #}\n", 1, "'{#'"),
    ("# source: {{ lookup('pipe','id') }}\nnet.ipv4.tcp_sack = 0\n", 1, "'{{'"),
    ("net.ipv4.tcp_sack = 0\x00\n", 1, "U+0000"),
    ("net.ipv4.tcp_sack = 0\n\nnet.core.somaxconn = 1\x1b[2J\n", 3, "U+001B"),
    ("net.ipv4.tcp_sack = 0\nkernel.x = a\u202eb\n", 2, "U+202E"),
    ("net.core.rmem_max = " + "9" * 5000 + "\n", 1, "longer than"),
    ("net.core.rmem_max = " + "9" * 400 + "\n", 1, "out of range"),
    ("net.core.rmem_max = 1_000\n", 1, "not numeric"),
    ("net.core.rmem_max = \u0661\u0662\u0663\n", 1, "not numeric"),
    ("net.core.rmem_max = \u00b2\n", 1, "not numeric"),
    ("net.ipv4.tcp_syn_retries = 18446744073709551616\n", 1, "beyond any sysctl's 64 bits"),
    ("net.ipv4.ip_local_port_range = 1024 " + "9" * 400 + "\n", 1, "beyond any sysctl's 64 bits"),
])
def test_hostile_profile_content_is_refused_naming_file_and_line(tmp_path, body, where, fragment):
    path = tmp_path / "bad.conf"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_profile(str(path))
    msg = str(err.value)
    assert msg.startswith(f"{path}:{where}: ") and fragment in msg and "\n" not in msg, msg


def test_invalid_utf8_names_the_line(tmp_path):
    path = tmp_path / "bad.conf"
    path.write_bytes(b"net.ipv4.tcp_sack = 0\n# caf\xe9\n")
    with pytest.raises(SpecError, match=r"bad.conf:2: not UTF-8"):
        load_profile(str(path))


def test_profile_file_name_must_be_a_name(tmp_path):
    path = tmp_path / "{{x}}.conf"
    path.write_text("net.ipv4.tcp_sack = 0\n")
    with pytest.raises(UsageError, match="file name"):
        load_profile(str(path))


def test_include_depth_is_bounded(tmp_path):
    for i in range(40):
        (tmp_path / f"p{i}.conf").write_text(f"# include: p{i + 1}\nnet.ipv4.tcp_sack = 0\n")
    (tmp_path / "p40.conf").write_text("net.ipv4.tcp_sack = 1\n")
    with pytest.raises(SpecError, match="nested deeper than 16"):
        load_profile(str(tmp_path / "p0.conf"))
