"""Profile parsing: sysctl.d format, header, includes, NIC files, the bundled profiles."""
from __future__ import annotations

import re

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


def test_cnaf_sc_table_exactly():
    p = load_profile("cnaf-sc-wan-1g")
    values = {s.key: s.value for s in p.settings}
    assert values == {
        "net.core.rmem_max": "16777216", "net.core.wmem_max": "16777216",
        "net.core.rmem_default": "16777216", "net.core.wmem_default": "16777216",
        "net.ipv4.tcp_rmem": "4096 87380 16777216", "net.ipv4.tcp_wmem": "4096 65536 16777216",
        "net.core.netdev_max_backlog": "100000", "net.ipv4.tcp_timestamps": "0",
        "net.ipv4.tcp_sack": "0", "nic.txqueuelen": "10000"}


def test_other_bundled_values():
    lan = {s.key: s.value for s in load_profile("lan-10ge-jumbo").settings}
    assert lan["net.core.rmem_max"] == str(32 * 2**20) and lan["nic.mtu"] == "9216"
    assert lan["net.core.netdev_max_backlog"] == "100000" and "nic.txqueuelen" in lan
    daq = {s.key: s.value for s in load_profile("daq-udp-lossless").settings}
    assert daq["net.core.rmem_max"] == str(2**20) and daq["nic.ring.rx"] == "4096"
    assert daq["nic.txqueuelen"] == "1600" and daq["nic.pause.rx"] == daq["nic.pause.tx"] == "on"
    dtn = load_profile("dtn-10g")
    assert dtn.get("net.core.default_qdisc").optional
    assert dtn.get("net.ipv4.tcp_congestion_control").value == "bbr"
    legacy = {s.key: s.value for s in load_profile("untuned-legacy").settings}
    assert int(legacy["net.ipv4.tcp_rmem"].split()[2]) < 256 * 1024


def test_includes_override_in_place_and_remember_origin():
    p = load_profile("dtn-100g")
    assert p.includes == ("dtn-40g",)
    rmem = p.get("net.ipv4.tcp_rmem")
    assert rmem.value == "4096 67108864 1073741824" and rmem.path.endswith("dtn-100g.conf")
    cc = p.get("net.ipv4.tcp_congestion_control")
    assert cc.path.endswith("dtn-10g.conf") and cc.line > 0         # from two levels down
    assert p.get("net.core.netdev_max_backlog").value == "250000"   # from dtn-40g
    assert p.get("nic.txqueuelen").value == "10000"                 # NIC settings included too


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
