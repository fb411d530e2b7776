"""ansible-playbook playbooks/tune.yml for real against the test sshd host (check and apply)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gridxfer.tuning.api import apply, load_profile, rollback, verify
from gridxfer.tuning.export import VARS_DIR, ansible_vars_yaml
from gridxfer.tuning.targets.ansible import PLAYBOOK, AnsibleTarget, _env
from gridxfer.tuning.testing import scratch_netns, sshd_host

pytestmark = [pytest.mark.root, pytest.mark.integration]
KEYS = ["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_mtu_probing",
        "net.ipv4.tcp_congestion_control", "net.ipv4.tcp_sack"]


@pytest.fixture(scope="module")
def host():
    if os.geteuid() != 0 or not shutil.which("ansible-playbook"):
        pytest.skip("needs root and ansible")
    with scratch_netns() as ns, sshd_host(ns) as sshd:
        yield ns, sshd, sshd.inventory()


def snap(ns):
    return {k: ns.sysctl(k) for k in KEYS}


def playbook(inventory, *extra):
    env = dict(os.environ)
    env.update(ANSIBLE_NOCOLOR="1", ANSIBLE_PIPELINING="1", ANSIBLE_RETRY_FILES_ENABLED="0")
    return subprocess.run(["ansible-playbook", "-i", inventory, str(PLAYBOOK), *extra],
                          capture_output=True, text=True, env=env, timeout=300)


def test_playbook_check_mode_then_apply_mode(host, tmp_path):
    ns, sshd, inv = host
    before = snap(ns)
    # 1. check mode with a bundled profile, vars from playbooks/vars/dtn-10g.yml: reports
    #    changes, writes nothing
    check = playbook(inv, "-e", "profile=dtn-10g", "-e", f"gridxfer_runtime_file={tmp_path}/rt.conf",
                     "--check", "--diff")
    assert check.returncode == 0, check.stdout[-2000:]
    assert "changed=0" not in check.stdout and "net.ipv4.tcp_mtu_probing=1" in check.stdout
    assert snap(ns) == before
    # 2. apply mode with a profile exported by gridxfer, NIC settings included
    (tmp_path / "wanlab.conf").write_text(
        "# source: test\nnet.ipv4.tcp_rmem = 4096 87380 12582912\n"
        "net.ipv4.tcp_wmem = 4096 65536 12582912\nnet.ipv4.tcp_mtu_probing = 1\n"
        "net.ipv4.tcp_sack = 0\n-net.ipv4.no_such_key_gx = 1\n")
    (tmp_path / "wanlab.nic").write_text("txqueuelen = 3000\n")
    vars_file = tmp_path / "wanlab.yml"
    vars_file.write_text(ansible_vars_yaml(load_profile(str(tmp_path / "wanlab.conf"))))
    args = ["-e", "profile=wanlab", "-e", f"gridxfer_vars_file={vars_file}",
            "-e", f"gridxfer_iface={ns.ns_if}", "-e", f"gridxfer_runtime_file={tmp_path}/rt.conf"]
    try:
        done = playbook(inv, *args)
        assert done.returncode == 0, done.stdout[-2000:]
        assert ns.sysctl("net.ipv4.tcp_rmem").split() == ["4096", "87380", "12582912"]
        assert ns.sysctl("net.ipv4.tcp_sack") == "0"
        assert ns.exec("cat", f"/sys/class/net/{ns.ns_if}/tx_queue_len").strip() == "3000"
        # 3. check mode again: nothing left to change (idempotent)
        again = playbook(inv, *args, "--check", "--diff")
        assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout[-2000:]
    finally:
        for k, v in before.items():
            ns.exec("sysctl", "-q", "-w", f"{k}={v}")


@pytest.mark.slow      # ~25 s of ansible start-ups; the contract suite covers the target itself
def test_engine_through_the_ansible_target(host, gridxfer_home):
    ns, sshd, inv = host
    before = snap(ns)
    t = AnsibleTarget("gxhost", inv, runtime_file=f"{sshd.workdir}/runtime.conf")
    res = apply(load_profile("dtn-10g"), t, skip_global=True)
    assert res.changed and ns.sysctl("net.ipv4.tcp_mtu_probing") == "1"
    assert verify(load_profile("dtn-10g"), t, skip_global=True).ok
    rollback(t)
    assert snap(ns) == before


def test_session_interface_seen_through_ansible(host):
    ns, sshd, inv = host
    assert AnsibleTarget("gxhost", inv).session_interfaces() == {ns.ns_if}


def test_exported_vars_are_in_sync_with_profiles():
    from gridxfer.tuning.profile import list_profiles
    for path in list_profiles():
        if Path(path).parent.name != "sysctl-profiles":
            continue
        assert (VARS_DIR / f"{path.stem}.yml").read_text() == ansible_vars_yaml(
            load_profile(str(path))), f"regenerate playbooks/vars/{path.stem}.yml"
    assert _env()["ANSIBLE_STDOUT_CALLBACK"] == "json"


def test_templates_never_run_on_the_controller(host, tmp_path):
    """A value that bypassed the profile parser (here: written by hand, or read back from a
    host) still reaches Ansible as text: the lookup would create the marker on the controller."""
    from gridxfer.tuning.profile import Profile, Setting
    from gridxfer.tuning.targets.base import WriteFailed
    ns, sshd, inv = host
    marker = tmp_path / "pwned"
    evil = "{{ lookup('pipe', 'touch %s; echo 5') }}" % marker
    before = ns.sysctl("net.ipv4.tcp_syn_retries")
    t = AnsibleTarget("gxhost", inv, runtime_file=f"{sshd.workdir}/runtime.conf")
    with pytest.raises(WriteFailed):                          # the literal text is no number
        t.write({"net.ipv4.tcp_syn_retries": evil})
    assert not marker.exists() and ns.sysctl("net.ipv4.tcp_syn_retries") == before
    res = t.run(["echo", evil])
    assert res.ok and res.stdout.strip() == evil and not marker.exists()
    t.put_file(str(tmp_path / "persisted.conf"), f"# intent: {evil}\n")
    assert (tmp_path / "persisted.conf").read_text() == f"# intent: {evil}\n"
    assert not marker.exists()
    # the exported vars files (playbooks/vars/*.yml) carry !unsafe as well
    prof = Profile("evil", str(tmp_path / "evil.conf"),
                   settings=(Setting("net.ipv4.tcp_syn_retries", evil),))
    vars_file = tmp_path / "evil.yml"
    vars_file.write_text(ansible_vars_yaml(prof))
    done = playbook(inv, "-e", "profile=evil", "-e", f"gridxfer_vars_file={vars_file}",
                    "-e", f"gridxfer_runtime_file={tmp_path}/rt.conf")
    assert done.returncode != 0 and not marker.exists(), done.stdout[-2000:]
    assert ns.sysctl("net.ipv4.tcp_syn_retries") == before
