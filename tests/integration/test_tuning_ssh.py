"""The ssh target against a real sshd the test starts inside a scratch namespace."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from gridxfer.cli.main import main
from gridxfer.tuning.api import apply, diff, load_profile, rollback, verify
from gridxfer.tuning.targets.ssh import HostKeyRefused, SshTarget
from gridxfer.tuning.testing import scratch_netns, sshd_host

pytestmark = [pytest.mark.root, pytest.mark.integration]
KEYS = ["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_mtu_probing",
        "net.ipv4.tcp_no_metrics_save", "net.ipv4.tcp_congestion_control"]


@pytest.fixture(scope="module")
def host():
    if os.geteuid() != 0:
        pytest.skip("needs root")
    with scratch_netns() as ns, sshd_host(ns) as sshd:
        yield ns, sshd


def snap(ns):
    return {k: ns.sysctl(k) for k in KEYS}


def ssh_target(sshd, known_hosts=None, **kw):
    return SshTarget(sshd.address, user="root", port=sshd.port, key_filename=sshd.key,
                     known_hosts=known_hosts or sshd.known_hosts, **kw)


def test_apply_verify_rollback_over_ssh(host, gridxfer_home):
    ns, sshd = host
    before = snap(ns)
    with ssh_target(sshd) as t:
        res = apply(load_profile("dtn-40g"), t, skip_global=True)
        assert ns.sysctl("net.ipv4.tcp_rmem").split() == ["4096", "87380", "67108864"]
        assert res.changed and verify(load_profile("dtn-40g"), t, skip_global=True).ok
        assert (gridxfer_home / "tuning" / f"{t.state_id}.json").exists()
        rollback(t)
    assert snap(ns) == before


def test_a_host_in_a_child_namespace_never_gets_kernel_or_vm_keys(host, gridxfer_home):
    """The sshd runs in a namespace of this machine (as a container would): kernel.*, vm.*
    there are the host's. cnaf-sc-wan-1g carries kernel.sysrq/core_uses_pid (the SC table)."""
    ns, sshd = host
    with ssh_target(sshd) as t:
        scope = t.out_of_scope(["kernel.core_uses_pid", "vm.swappiness", "net.ipv4.tcp_sack"])
        assert set(scope) == {"kernel.core_uses_pid", "vm.swappiness"}
        assert all(r.startswith("global") for r in scope.values())
        items = {i.key: i for i in diff(load_profile("cnaf-sc-wan-1g"), t, skip_global=True)}
        assert items["kernel.core_uses_pid"].status == "skipped"
        assert items["net.ipv4.tcp_sack"].status != "skipped"


def test_sudo_prefix_is_used_when_asked(host, gridxfer_home):
    ns, sshd = host
    before = snap(ns)
    with ssh_target(sshd, sudo=True) as t:
        assert t.command_line(["sysctl", "-w", "a=1 2"]) == "sudo -n -- sysctl -w 'a=1 2'"
        apply(load_profile("untuned-legacy"), t, skip_global=True)
        assert ns.sysctl("net.ipv4.tcp_congestion_control") == "reno"
        rollback(t)
    assert snap(ns) == before


@pytest.mark.parametrize("which", ["empty", "wrong"])
def test_unknown_or_changed_host_key_is_refused_and_nothing_written(host, gridxfer_home, which):
    ns, sshd = host
    before = snap(ns)
    kh = sshd.empty_known_hosts if which == "empty" else sshd.wrong_known_hosts
    with pytest.raises(HostKeyRefused,
                       match="unknown host key" if which == "empty" else "does not match"):
        apply(load_profile("dtn-10g"), ssh_target(sshd, known_hosts=kh), skip_global=True)
    assert snap(ns) == before
    assert not list((gridxfer_home / "tuning").glob("*.json"))


def test_unknown_host_key_accepted_only_with_explicit_opt_in(host, tmp_path, capsys):
    ns, sshd = host
    kh = tmp_path / "known_hosts"
    base = ["tune", "diff", "dtn-10g", "--skip-global",
            f"--host=ssh:root@{sshd.address}:{sshd.port}",
            "--ssh-key", sshd.key, "--known-hosts", str(kh)]
    assert main(base) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--accept-unknown-host-key" in err
    assert main(base + ["--accept-unknown-host-key"]) == 0
    assert subprocess.run(["ssh-keygen", "-F", f"[{sshd.address}]:{sshd.port}", "-f", str(kh)],
                          capture_output=True).returncode == 0
    assert main(base) == 0                                  # now known


def test_cli_apply_verify_rollback_over_ssh(host, gridxfer_home, capsys):
    ns, sshd = host
    before = snap(ns)
    common = [f"--host=ssh:root@{sshd.address}:{sshd.port}", "--ssh-key", sshd.key,
              "--known-hosts", sshd.known_hosts, "--skip-global"]
    assert main(["tune", "apply", "cnaf-sc-wan-1g", "--dry-run", *common]) == 0
    assert snap(ns) == before
    assert main(["tune", "apply", "cnaf-sc-wan-1g", *common]) == 0
    assert ns.sysctl("net.ipv4.tcp_sack") == "0" and ns.sysctl("net.ipv4.tcp_timestamps") == "0"
    capsys.readouterr()
    assert main(["tune", "verify", "cnaf-sc-wan-1g", "--json", *common]) == 0
    assert json.loads(capsys.readouterr().out)[0]["ok"] is True
    assert main(["tune", "verify", "dtn-10g", *common]) == 1          # other profile: drift
    assert main(["tune", "rollback", *common[:-1]]) == 0
    assert ns.sysctl("net.ipv4.tcp_sack") == "1"


def test_mtu_on_the_session_interface_needs_force(host, tmp_path, gridxfer_home, capsys):
    ns, sshd = host
    (tmp_path / "jumbo.conf").write_text("net.ipv4.tcp_mtu_probing = 1\n")
    (tmp_path / "jumbo.nic").write_text("mtu = 9000\ntxqueuelen = 4000\n")
    link = lambda: json.loads(ns.exec("ip", "-j", "link", "show", "dev", ns.ns_if))[0]  # noqa: E731
    mtu0 = link()["mtu"]
    common = [str(tmp_path / "jumbo.conf"), f"--host=ssh:root@{sshd.address}:{sshd.port}",
              "--ssh-key", sshd.key, "--known-hosts", sshd.known_hosts, "--iface", ns.ns_if]
    assert main(["tune", "apply", *common]) == 2
    err = capsys.readouterr().err
    assert "carries the SSH session" in err and "--force" in err
    assert link()["mtu"] == mtu0 and ns.sysctl("net.ipv4.tcp_mtu_probing") == "0"
    assert main(["tune", "apply", *common, "--force"]) == 0
    assert link()["mtu"] == 9000 and link()["txqlen"] == 4000
    assert main(["tune", "rollback", *common[1:6]]) == 0
    assert link()["mtu"] == mtu0


def server_key(sshd):
    return Path(sshd.known_hosts).read_text().split()[1:3]      # type, base64


def other_key(sshd):
    return Path(sshd.wrong_known_hosts).read_text().split()[1:3]


def test_known_hosts_read_like_openssh(host, tmp_path, capsys):
    """Comments, blank lines, unknown key types, a @cert-authority line and a hashed entry:
    the host is recognised and the file is left byte for byte as it was."""
    from gridxfer.tuning.targets.known_hosts import hash_name
    ns, sshd = host
    t, b64 = server_key(sshd)
    ot, o64 = other_key(sshd)
    kh = tmp_path / "known_hosts"
    text = (f"# site hosts\n\n@cert-authority *.example.org {ot} {o64} site-ca\n"
            f"[{sshd.address}]:{sshd.port} ssh-future-key AAAAB3NzaC1yc2EAAAADAQAB\n"
            f"other.example.org,!x.example.org {ot} {o64}\n"
            f"{hash_name(f'[{sshd.address}]:{sshd.port}')} {t} {b64} hashed\n")
    kh.write_text(text)
    argv = ["tune", "diff", "dtn-10g", "--skip-global",
            f"--host=ssh:root@{sshd.address}:{sshd.port}",
            "--ssh-key", sshd.key, "--known-hosts", str(kh)]
    assert main(argv) == 0, capsys.readouterr().err
    assert kh.read_text() == text


def test_revoked_host_key_is_refused(host, tmp_path, gridxfer_home, capsys):
    ns, sshd = host
    t, b64 = server_key(sshd)
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[{sshd.address}]:{sshd.port} {t} {b64}\n@revoked * {t} {b64} stolen\n")
    before = snap(ns)
    argv = ["tune", "apply", "untuned-legacy", "--skip-global",
            f"--host=ssh:root@{sshd.address}:{sshd.port}", "--ssh-key", sshd.key,
            "--known-hosts", str(kh)]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"marked @revoked in {kh}:2" in err, err
    assert snap(ns) == before and not list((gridxfer_home / "tuning").glob("*.json"))
    with pytest.raises(HostKeyRefused, match="@revoked"):
        ssh_target(sshd, known_hosts=str(kh), accept_unknown_host_key=True).run(["true"])


def test_unknown_key_appends_one_line_and_keeps_the_rest(host, tmp_path, capsys):
    ns, sshd = host
    ot, o64 = other_key(sshd)
    kh = tmp_path / "known_hosts"
    original = (f"# keep me\n@cert-authority [{sshd.address}]:* {ot} {o64}\n"
                "legacy.example.org ssh-future-key AAAAB3NzaC1yc2EAAAADAQAB  # no newline")
    kh.write_text(original)
    argv = ["tune", "diff", "dtn-10g", "--skip-global",
            f"--host=ssh:root@{sshd.address}:{sshd.port}",
            "--ssh-key", sshd.key, "--known-hosts", str(kh)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "@cert-authority line, ignored" in err and "unknown host key" in err
    assert kh.read_text() == original
    assert main(argv + ["--accept-unknown-host-key"]) == 0
    text = kh.read_text()
    assert text.startswith(original + "\n") and text.count("\n") == original.count("\n") + 2
    assert subprocess.run(["ssh-keygen", "-F", f"[{sshd.address}]:{sshd.port}", "-f", str(kh)],
                          capture_output=True).returncode == 0
    assert main(argv) == 0 and kh.read_text() == text           # known now, nothing added


def test_system_known_hosts_is_read_after_the_users(host, tmp_path):
    """As ssh(1): the user's file, then the system's (/etc/ssh/ssh_known_hosts by default),
    one set: a key known only there is accepted, a wrong or @revoked one there refused
    naming that file; an accepted unknown key goes to the user's file, never the system's."""
    ns, sshd = host
    t, b64 = server_key(sshd)
    ot, o64 = other_key(sshd)
    name = f"[{sshd.address}]:{sshd.port}"
    user, system = tmp_path / "known_hosts", tmp_path / "ssh_known_hosts"
    user.write_text("# nothing for this host\n")

    def target(**kw):
        return ssh_target(sshd, known_hosts=str(user),
                          global_known_hosts=[tmp_path / "missing", system], **kw)

    system.write_text(f"{name} {t} {b64}\n")
    with target() as tg:
        assert tg.run(["true"]).ok
    system.write_text(f"# site\n{name} {ot} {o64}\n")
    with pytest.raises(HostKeyRefused, match=f"does not match {system}:2"):
        target().run(["true"])
    user.write_text(f"{name} {t} {b64}\n")
    system.write_text(f"@revoked * {t} {b64}\n")
    with pytest.raises(HostKeyRefused, match=f"@revoked in {system}:1"):
        target().run(["true"])
    user.write_text("")
    system.write_text("# empty\n")
    with target(accept_unknown_host_key=True) as tg:
        assert tg.run(["true"]).ok
    assert system.read_text() == "# empty\n" and len(user.read_text().splitlines()) == 1


def test_the_key_type_known_hosts_has_is_negotiated_first(host):
    """The server has ed25519 and ecdsa keys; known_hosts only the ecdsa one (as ssh(1) would
    ask for it): that key is used, not refused as unknown."""
    ns, sshd = host
    with ssh_target(sshd, known_hosts=sshd.ecdsa_known_hosts) as t:
        assert t.run(["true"]).ok
        assert t._client.get_transport().get_remote_server_key().get_name().startswith("ecdsa")
