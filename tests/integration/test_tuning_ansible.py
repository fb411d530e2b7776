"""ansible-playbook playbooks/tune.yml for real against the test sshd host (check and apply)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
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
    check = playbook(inv, "-e", "profile=dtn-10g", "-e",
                     f"gridxfer_runtime_file={tmp_path}/rt.conf", "--check", "--diff")
    assert check.returncode == 0, check.stdout[-2000:]
    assert "changed=0" not in check.stdout and "net.ipv4.tcp_mtu_probing: " in check.stdout
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


def test_check_diff_shows_real_before_and_after_and_changes_only_what_differs(host, tmp_path):
    """--check --diff: the diff holds each key's value as the host has it (tabs and all, read
    back) and the profile's; "changed" only for keys that differ (bbr already set: unchanged).
    It used to report every key changed, and no before/after at all."""
    ns, sshd, inv = host
    before = snap(ns)
    try:
        ns.exec("sysctl", "-q", "-w", "net.ipv4.tcp_congestion_control=bbr")
        ns.exec("sysctl", "-q", "-w", "net.ipv4.tcp_sack=1")
        ns.exec("sysctl", "-q", "-w", "net.ipv4.tcp_mtu_probing=0")
        now = snap(ns)
        rmem_now = " ".join(now["net.ipv4.tcp_rmem"].split())
        assert rmem_now != "4096 87380 12582912"
        (tmp_path / "mixed.conf").write_text(
            "net.ipv4.tcp_congestion_control = bbr\nnet.ipv4.tcp_sack = 1\n"
            "net.ipv4.tcp_rmem = 4096 87380 12582912\nnet.ipv4.tcp_mtu_probing = 1\n"
            "-net.ipv4.no_such_key_gx = 1\n")
        vars_file = tmp_path / "mixed.yml"
        vars_file.write_text(ansible_vars_yaml(load_profile(str(tmp_path / "mixed.conf"))))
        check = playbook(inv, "-e", "profile=mixed", "-e", f"gridxfer_vars_file={vars_file}",
                         "-e", f"gridxfer_runtime_file={tmp_path}/rt.conf", "--check", "--diff")
        out = check.stdout
        assert check.returncode == 0, out[-3000:]
        assert snap(ns) == now                                      # check mode wrote nothing
        changed = {line.split("(item=", 1)[1].split(":", 1)[0] for line in out.splitlines()
                   if line.startswith("changed: [gxhost] => (item=")}
        assert changed == {"net.ipv4.tcp_rmem", "net.ipv4.tcp_mtu_probing"}, out[-3000:]
        assert f"(item=net.ipv4.tcp_rmem: {rmem_now} -> 4096 87380 12582912)" in out
        assert "(item=net.ipv4.tcp_congestion_control: bbr -> bbr)" in out   # shown, skipped
        # the diff: real before, profile's after, unchanged keys as context only
        assert f"-net.ipv4.tcp_rmem = {rmem_now}\n" in out
        assert "+net.ipv4.tcp_rmem = 4096 87380 12582912\n" in out
        assert "-net.ipv4.tcp_mtu_probing = 0\n" in out and "+net.ipv4.tcp_mtu_probing = 1\n" in out
        assert " net.ipv4.tcp_congestion_control = bbr\n" in out
        assert "-net.ipv4.tcp_congestion_control" not in out
        assert "-net.ipv4.no_such_key_gx" not in out and "+net.ipv4.no_such_key_gx" not in out
        assert "(item=net.ipv4.no_such_key_gx: (missing) -> 1)" in out       # optional: skipped
        assert '"mode"' not in out                   # the record file's directory is left alone
    finally:
        for k, v in before.items():
            ns.exec("sysctl", "-q", "-w", f"{k}={v}")


def test_persist_writes_every_key_even_those_already_set(host, tmp_path):
    """gridxfer_persist: the sysctl.d file holds the whole profile (a key already at its value
    is recorded too), and only the differing keys are written live."""
    ns, sshd, inv = host
    before = snap(ns)
    try:
        ns.exec("sysctl", "-q", "-w", "net.ipv4.tcp_congestion_control=bbr")
        (tmp_path / "keep.conf").write_text("net.ipv4.tcp_congestion_control = bbr\n"
                                            "net.ipv4.tcp_rmem = 4096 87380 12582912\n"
                                            "-net.ipv4.no_such_key_gx = 1\n")
        vars_file = tmp_path / "keep.yml"
        vars_file.write_text(ansible_vars_yaml(load_profile(str(tmp_path / "keep.conf"))))
        done = playbook(inv, "-e", "profile=keep", "-e", f"gridxfer_vars_file={vars_file}",
                        "-e", "gridxfer_persist=true", "-e", f"gridxfer_sysctl_dir={tmp_path}/d")
        assert done.returncode == 0, done.stdout[-3000:]
        text = (tmp_path / "d" / "90-gridxfer-keep.conf").read_text()
        assert text.endswith("\n") and not text.endswith("\n\n"), repr(text[-80:])
        lines = text.splitlines()
        assert lines[1:] == ["net.ipv4.tcp_congestion_control = bbr",
                             "net.ipv4.tcp_rmem = 4096 87380 12582912"]
        assert ns.sysctl("net.ipv4.tcp_rmem").split() == ["4096", "87380", "12582912"]
    finally:
        for k, v in before.items():
            ns.exec("sysctl", "-q", "-w", f"{k}={v}")


def test_a_profile_with_nic_settings_only(host, tmp_path):
    ns, sshd, inv = host
    (tmp_path / "niconly.conf").write_text("# source: test\n")
    (tmp_path / "niconly.nic").write_text("txqueuelen = 2500\n")
    vars_file = tmp_path / "niconly.yml"
    vars_file.write_text(ansible_vars_yaml(load_profile(str(tmp_path / "niconly.conf"))))
    check = playbook(inv, "-e", "profile=niconly", "-e", f"gridxfer_vars_file={vars_file}",
                     "-e", f"gridxfer_iface={ns.ns_if}", "-e",
                     f"gridxfer_runtime_file={tmp_path}/rt.conf", "--check", "--diff")
    assert check.returncode == 0, check.stdout[-3000:]


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


def test_engine_persist_through_the_ansible_target_keeps_every_line(host, gridxfer_home,
                                                                    tmp_path, monkeypatch):
    """`tune apply --persist` through Ansible: the sysctl.d file on the host is exactly what
    gridxfer rendered, its last line ended by a newline; rollback removes it."""
    from gridxfer.tuning.profile import render_sysctl_d
    ns, sshd, inv = host
    before = snap(ns)
    monkeypatch.setenv("GRIDXFER_SYSCTL_DIR", str(tmp_path / "sysctl.d"))
    (tmp_path / "sysctl.d").mkdir()
    t = AnsibleTarget("gxhost", inv, runtime_file=f"{sshd.workdir}/runtime.conf")
    profile = load_profile("dtn-10g")
    try:
        res = apply(profile, t, skip_global=True, persist=True)
        text = Path(res.persisted).read_text()
        assert text == render_sysctl_d(profile, header=f"written by gridxfer for {t.label}")
        assert text.endswith("\n") and not text.endswith("\n\n")
    finally:
        rollback(t)
    assert snap(ns) == before and not Path(res.persisted).exists()


def test_session_interface_seen_through_ansible(host):
    ns, sshd, inv = host
    assert AnsibleTarget("gxhost", inv).session_interfaces() == {ns.ns_if}


def test_exported_vars_are_in_sync_with_profiles():
    from gridxfer.tuning.profile import list_profiles
    bundled = [p for p in list_profiles() if Path(p).parent.name == "sysctl-profiles"]
    for path in bundled:
        assert (VARS_DIR / f"{path.stem}.yml").read_text() == ansible_vars_yaml(
            load_profile(str(path))), (f"regenerate playbooks/vars/{path.stem}.yml "
                                       "(gridxfer.tuning.export.export_bundled)")
    # no vars file left behind by a profile that is gone
    assert {p.stem for p in VARS_DIR.glob("*.yml")} == {p.stem for p in bundled}
    assert _env()["ANSIBLE_STDOUT_CALLBACK"] == "json"


def test_ansible_lint_production_profile_passes_offline():
    """The real ansible-lint, with the repository's .ansible-lint (production profile,
    offline: Galaxy is never asked)."""
    lint = shutil.which("ansible-lint", path=os.pathsep.join(
        [str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    assert lint is not None, "ansible-lint is missing: pip install -e '.[test]' (setup.cfg)"
    root = PLAYBOOK.parents[1]
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", NO_COLOR="1", ANSIBLE_LINT_NODEPS="1")
    res = subprocess.run([lint, "-f", "pep8", "playbooks/"], cwd=root, capture_output=True,
                         text=True, env=env, timeout=600)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    assert "Profile 'production' was required, and it passed" in res.stderr + res.stdout


def test_requirements_name_the_collections_the_role_uses():
    import yaml
    req = yaml.safe_load((PLAYBOOK.parent / "requirements.yml").read_text())
    names = {c["name"] for c in req["collections"]}
    tasks = (PLAYBOOK.parent / "roles" / "gridxfer" / "tasks" / "main.yml").read_text()
    used = {m for m in ("ansible.posix", "ansible.utils") if f"{m}." in tasks}
    assert "ansible.posix" in names and used <= names


def test_templates_never_run_on_the_controller(host, tmp_path):
    """A value that bypassed the profile parser (here: written by hand, or read back from a
    host) still reaches Ansible as text: the lookup would create the marker on the controller."""
    from gridxfer.tuning.profile import Profile, Setting
    from gridxfer.tuning.targets.base import WriteFailed
    ns, sshd, inv = host
    marker = tmp_path / "pwned"
    evil = "{{ lookup('pipe', 'touch " + str(marker) + "; echo 5') }}"
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
