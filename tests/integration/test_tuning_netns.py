"""apply / verify / rollback for real inside network namespaces created by the tests;
values are read back from /proc/sys inside the namespace (ip netns exec)."""
from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest

from gridxfer.tuning import state as tstate
from gridxfer.tuning.api import (ApplyFailed, CrashedApply, ValidationError, apply, diff,
                                 load_profile, rollback, verify)
from gridxfer.tuning.settings import same
from gridxfer.tuning.targets.local import LocalTarget
from gridxfer.tuning.targets.netns import NetnsTarget
from gridxfer.tuning.testing import scratch_netns

pytestmark = [pytest.mark.root, pytest.mark.integration]

PER_NS = ["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_congestion_control",
          "net.ipv4.tcp_mtu_probing", "net.ipv4.tcp_no_metrics_save", "net.ipv4.tcp_sack",
          "net.ipv4.tcp_timestamps", "net.ipv4.tcp_syn_retries", "net.ipv4.tcp_fin_timeout"]


@pytest.fixture
def ns(gridxfer_home):
    if os.geteuid() != 0:
        pytest.skip("needs root")
    with scratch_netns() as n:
        yield n


def snapshot(ns, keys=PER_NS):
    return {k: ns.sysctl(k) for k in keys}


def write_profile(tmp_path, name, body, nic=None):
    path = tmp_path / f"{name}.conf"
    path.write_text(textwrap.dedent(body))
    if nic is not None:
        (tmp_path / f"{name}.nic").write_text(textwrap.dedent(nic))
    return str(path)


def test_apply_verify_rollback_dtn_10g(ns, gridxfer_home):
    before = snapshot(ns)
    t = NetnsTarget(ns.name)
    prof = load_profile("dtn-10g")
    res = apply(prof, t, skip_global=True)
    assert {i.key for i in res.changed} >= {"net.ipv4.tcp_rmem", "net.ipv4.tcp_mtu_probing"}
    assert ns.sysctl("net.ipv4.tcp_rmem").split() == ["4096", "87380", "33554432"]
    assert ns.sysctl("net.ipv4.tcp_wmem").split() == ["4096", "65536", "33554432"]
    assert ns.sysctl("net.ipv4.tcp_mtu_probing") == "1"
    assert ns.sysctl("net.ipv4.tcp_congestion_control") == "bbr"
    skipped = {i.key: i.reason for i in res.skipped}
    assert "global-only" in skipped["net.core.rmem_max"]
    assert verify(prof, t, skip_global=True).ok
    # saved originals: readable JSON, 0600, in apply order
    path = gridxfer_home / "tuning" / f"{t.state_id}.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    data = json.loads(path.read_text())
    assert data["status"] == "applied" and data["profile"] == "dtn-10g"
    assert [o["key"] for o in data["originals"]] == [i.key for i in res.changed]
    # drift is seen
    ns.exec("sysctl", "-q", "-w", "net.ipv4.tcp_mtu_probing=0")
    v = verify(prof, t, skip_global=True)
    assert not v.ok and [(d.key, d.expected, d.actual) for d in v.drifted] == [
        ("net.ipv4.tcp_mtu_probing", "1", "0")]
    rb = rollback(t)
    assert rb.ok and [o.key for o in rb.restored][0] == res.changed[-1].key   # reverse order
    assert snapshot(ns) == before
    assert json.loads(path.read_text())["status"] == "restored"


def test_stacked_applies_roll_back_to_pristine(ns):
    before = snapshot(ns)
    t = NetnsTarget(ns.name)
    apply(load_profile("untuned-legacy"), t, skip_global=True)
    apply(load_profile("dtn-100g"), t, skip_global=True)
    assert ns.sysctl("net.ipv4.tcp_rmem").split() == ["4096", "67108864", "1073741824"]
    second = apply(load_profile("dtn-100g"), t, skip_global=True)
    assert second.changed == () and second.state_file is None
    rollback(t)
    assert snapshot(ns) == before


def test_global_keys_refused_inside_namespace_and_nothing_written(ns, gridxfer_home):
    before = snapshot(ns)
    t = NetnsTarget(ns.name)
    with pytest.raises(ValidationError, match=r"global-only.*net.core.rmem_max.*nothing written"):
        apply(load_profile("dtn-10g"), t)
    assert snapshot(ns) == before
    assert not (gridxfer_home / "tuning" / f"{t.state_id}.json").exists()


@pytest.mark.parametrize("position", [0, 2, 4])
def test_half_way_failure_leaves_every_value_as_before(ns, tmp_path, gridxfer_home, position):
    """An invalid value (kernel max for tcp_syn_retries is 127) injected as the N-th key."""
    keys = [("net.ipv4.tcp_rmem", "4096 65536 8388608"),
            ("net.ipv4.tcp_wmem", "4096 32768 8388608"),
            ("net.ipv4.tcp_mtu_probing", "2"), ("net.ipv4.tcp_sack", "0"),
            ("net.ipv4.tcp_fin_timeout", "17")]
    keys.insert(position, ("net.ipv4.tcp_syn_retries", "500"))
    path = write_profile(tmp_path, "halfway", "".join(f"{k} = {v}\n" for k, v in keys))
    before = snapshot(ns)
    t = NetnsTarget(ns.name)
    with pytest.raises(ApplyFailed, match="tcp_syn_retries"):
        apply(load_profile(path), t)
    assert snapshot(ns) == before
    st = tstate.load(t.state_id)
    assert st is not None and st.status == tstate.RESTORED


def test_failure_after_earlier_apply_keeps_the_first_originals(ns, tmp_path):
    before = snapshot(ns)
    t = NetnsTarget(ns.name)
    apply(load_profile("untuned-legacy"), t, skip_global=True)
    after_first = snapshot(ns)
    bad = write_profile(tmp_path, "bad", "net.ipv4.tcp_sack = 0\nnet.ipv4.tcp_syn_retries = 999\n")
    with pytest.raises(ApplyFailed):
        apply(load_profile(bad), t)
    assert snapshot(ns) == after_first
    assert tstate.load(t.state_id).status == tstate.APPLIED
    rollback(t)
    assert snapshot(ns) == before


CRASHER = """
import os, sys
from gridxfer.tuning.api import apply, load_profile
from gridxfer.tuning.targets.netns import NetnsTarget

class Crashing(NetnsTarget):
    writes = 0
    def run(self, argv, *, input=None):
        if argv[0] == "sysctl":
            Crashing.writes += 1
            if Crashing.writes == 3:
                os._exit(9)          # the process dies between two writes
        return super().run(argv, input=input)

apply(load_profile(sys.argv[2]), Crashing(sys.argv[1]))
"""


def test_crashed_apply_is_detected_and_rolled_back(ns, tmp_path, gridxfer_home, capsys):
    from gridxfer.cli.main import main
    prof = write_profile(tmp_path, "crashy", "net.ipv4.tcp_rmem = 4096 65536 8388608\n"
                         "net.ipv4.tcp_mtu_probing = 2\nnet.ipv4.tcp_sack = 0\n"
                         "net.ipv4.tcp_fin_timeout = 17\n")
    before = snapshot(ns)
    proc = subprocess.run([sys.executable, "-c", CRASHER, ns.name, prof], capture_output=True,
                          text=True, env=dict(os.environ))
    assert proc.returncode == 9
    assert snapshot(ns) != before                       # two keys were written, then it died
    t = NetnsTarget(ns.name)
    assert tstate.load(t.state_id).status == tstate.APPLYING
    with pytest.raises(CrashedApply, match="rollback"):
        apply(load_profile(prof), t)
    assert main(["tune", "diff", prof, "--host", f"netns:{ns.name}"]) == 0
    assert "stopped half-way" in capsys.readouterr().err
    assert main(["tune", "rollback", "--host", f"netns:{ns.name}"]) == 0
    assert snapshot(ns) == before
    apply(load_profile(prof), t)                        # usable again
    rollback(t)
    assert snapshot(ns) == before


def test_nic_settings_on_veth(ns, tmp_path):
    prof = write_profile(tmp_path, "nicky", "net.ipv4.tcp_mtu_probing = 1\n",
                         nic="txqueuelen = 5000\nmtu = 9000\nring.rx = 4096\npause.rx = on\n"
                             "coalesce.rx-usecs = 50\n")
    link = lambda: json.loads(ns.exec("ip", "-j", "link", "show", "dev", ns.ns_if))[0]  # noqa: E731
    mtu0, q0 = link()["mtu"], link()["txqlen"]
    t = NetnsTarget(ns.name)
    res = apply(load_profile(prof), t, ifaces=[ns.ns_if])
    assert link()["mtu"] == 9000 and link()["txqlen"] == 5000
    skipped = {i.key: i.reason for i in res.skipped}
    for param in ("ring.rx", "pause.rx", "coalesce.rx-usecs"):    # veth cannot: skipped
        assert skipped[f"nic[{ns.ns_if}].{param}"] == "not supported by the device"
    assert verify(load_profile(prof), t, ifaces=[ns.ns_if]).ok
    rollback(t)
    assert (link()["mtu"], link()["txqlen"]) == (mtu0, q0)


def test_persist_writes_a_sysctl_d_file_that_sysctl_p_accepts(ns, tmp_path, monkeypatch):
    conf_dir = tmp_path / "sysctl.d"
    conf_dir.mkdir()
    monkeypatch.setenv("GRIDXFER_SYSCTL_DIR", str(conf_dir))
    t = NetnsTarget(ns.name)
    res = apply(load_profile("dtn-10g"), t, persist=True, skip_global=True)
    out = conf_dir / "90-gridxfer-dtn-10g.conf"
    assert res.persisted == str(out) and out.exists()
    text = out.read_text()
    assert (
        "net.ipv4.tcp_rmem = 4096 87380 33554432" in text and "net.core.default_qdisc = fq" in text
    )
    rollback(t)
    assert not out.exists()                 # rollback removes what --persist wrote
    out.write_text(text)
    # the file is deployable as-is: only per-namespace keys fail here, no syntax errors
    p = subprocess.run(["ip", "netns", "exec", ns.name, "sysctl", "-p", str(out)],
                       capture_output=True, text=True)
    assert "syntax" not in p.stderr
    assert ns.sysctl("net.ipv4.tcp_mtu_probing") == "1"        # sysctl -p applied it


def test_global_keys_on_the_host_are_applied_and_restored(host_sysctl_lock, tmp_path,
                                                           gridxfer_home):
    """Global-only keys can only be tested on the host: always restored in finally."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    keys = ["net.core.rmem_max", "net.core.wmem_max", "net.core.netdev_max_backlog"]
    t = LocalTarget()
    saved = t.read(keys)
    try:
        body = "".join(f"{k} = {int(saved[k]) + 4096}\n" for k in keys)
        prof = load_profile(write_profile(tmp_path, "hostglobal", body))
        assert all(i.status == "change" for i in diff(prof, t))
        apply(prof, t)
        assert all(int(t.read([k])[k]) == int(saved[k]) + 4096 for k in keys)
        assert verify(prof, t).ok
        rollback(t)
        assert t.read(keys) == saved
    finally:
        t.write({k: v for k, v in saved.items() if v is not None})
    assert all(same(t.read([k])[k], saved[k]) for k in keys)


def test_local_target_refuses_mtu_on_the_ssh_session_interface(ns, tmp_path, monkeypatch):
    """Under SSH (SSH_CONNECTION set) the interface routing back to the client is protected."""
    monkeypatch.setenv("SSH_CONNECTION", f"{ns.ns_addr} 50000 {ns.host_addr} 22")
    prof = load_profile(write_profile(tmp_path, "jumbo", "", nic="mtu = 9000\ntxqueuelen = 2000\n"))
    t = LocalTarget()
    link = lambda: json.loads(subprocess.run(["ip", "-j", "link", "show", "dev", ns.host_if],  # noqa: E731
                                             capture_output=True, text=True).stdout)[0]
    mtu0, q0 = link()["mtu"], link()["txqlen"]
    with pytest.raises(ValidationError, match=f"{ns.host_if} carries the SSH session"):
        apply(prof, t, ifaces=[ns.host_if])
    assert (link()["mtu"], link()["txqlen"]) == (mtu0, q0)
    apply(prof, t, ifaces=[ns.host_if], force=True)
    assert (link()["mtu"], link()["txqlen"]) == (9000, 2000)
    rollback(t)
    assert (link()["mtu"], link()["txqlen"]) == (mtu0, q0)


def test_cli_several_hosts_and_json_keys(ns, capsys):
    from gridxfer.cli.main import main
    with scratch_netns() as other:
        before = [snapshot(ns), snapshot(other)]
        hosts = ["--host", f"netns:{ns.name}", "--host", f"netns:{other.name}", "--skip-global"]
        assert main(["tune", "apply", "dtn-10g", "--json", *hosts]) == 0
        out = json.loads(capsys.readouterr().out)
        assert [r["host"] for r in out] == [f"netns:{ns.name}", f"netns:{other.name}"]
        assert set(out[0]) == {"profile", "host", "dry_run", "items", "persisted", "state_file",
                               "changed", "skipped"}
        assert set(out[0]["items"][0]) == {"key", "expected", "current", "status",
                                           "reason", "where"}
        assert (
            ns.sysctl("net.ipv4.tcp_mtu_probing") == other.sysctl("net.ipv4.tcp_mtu_probing") == "1"
        )
        assert main(["tune", "verify", "dtn-10g", "--json", *hosts]) == 0
        v = json.loads(capsys.readouterr().out)
        assert set(v[0]) == {"profile", "host", "checked", "drifted", "skipped", "ok"}
        assert main(["tune", "rollback", "--json", *hosts[:4]]) == 0
        assert set(json.loads(capsys.readouterr().out)[0]) == {"host", "dry_run", "restored",
                                                               "failed", "profile", "ok",
                                                               "files"}
        assert [snapshot(ns), snapshot(other)] == before


def test_a_second_apply_on_the_same_host_is_locked_out(ns, gridxfer_home):
    from gridxfer.errors import GridxferError
    t = NetnsTarget(ns.name)
    before = snapshot(ns)
    with tstate.host_lock(t.state_id, t.label):
        with pytest.raises(GridxferError, match="another gridxfer tune"):
            apply(load_profile("untuned-legacy"), t, skip_global=True)
        assert apply(load_profile("untuned-legacy"), t, skip_global=True, dry_run=True).changed
    assert snapshot(ns) == before


HOST_KEYS = ["fs.file-max", "vm.swappiness", "kernel.pid_max", "net.core.rmem_max",
             "net.core.somaxconn"]


def test_netns_target_writes_only_the_namespace_keys(host_sysctl_lock, ns, tmp_path,
                                                     gridxfer_home, capsys):
    """fs.*, vm.*, kernel.* and net.core.rmem_max are refused (exit 2, the diff shown, keys
    listed) or skipped with --skip-global; the host keeps its values."""
    from gridxfer.cli.main import main
    host = LocalTarget()
    saved = host.read(HOST_KEYS)
    body = (f"net.ipv4.tcp_sack = 0\nnet.core.somaxconn = {int(saved['net.core.somaxconn']) + 7}\n"
            f"fs.file-max = {int(saved['fs.file-max']) - 1}\n"
            f"vm.swappiness = {(int(saved['vm.swappiness']) + 1) % 100}\n"
            f"kernel.pid_max = {int(saved['kernel.pid_max']) - 1}\n"
            f"net.core.rmem_max = {int(saved['net.core.rmem_max']) + 4096}\n")
    prof = write_profile(tmp_path, "wide", body)
    before = snapshot(ns, ["net.ipv4.tcp_sack", "net.core.somaxconn"])
    try:
        assert main(["tune", "apply", prof, "--host", f"netns:{ns.name}"]) == 2
        out, err = capsys.readouterr()
        assert len(err.strip().splitlines()) == 1 and "--skip-global" in err, err
        for key, line in [("fs.file-max", 3), ("vm.swappiness", 4), ("kernel.pid_max", 5),
                          ("net.core.rmem_max", 6)]:
            assert f"{key} (wide.conf:{line})" in err.replace(str(tmp_path) + "/", "")
            assert f"! {key}: " in out                    # the diff is shown
        assert "net.ipv4.tcp_sack" not in err and "~ net.ipv4.tcp_sack: " in out
        assert host.read(HOST_KEYS) == saved
        assert snapshot(ns, ["net.ipv4.tcp_sack", "net.core.somaxconn"]) == before
        assert main(["tune", "apply", prof, "--host", f"netns:{ns.name}", "--skip-global"]) == 0
        out = capsys.readouterr().out
        assert "changed 2, skipped 4" in out, out
        assert ns.sysctl("net.ipv4.tcp_sack") == "0"
        assert ns.sysctl("net.core.somaxconn") == str(int(saved["net.core.somaxconn"]) + 7)
        assert host.read(HOST_KEYS) == saved
        assert main(["tune", "rollback", "--host", f"netns:{ns.name}"]) == 0
        assert snapshot(ns, ["net.ipv4.tcp_sack", "net.core.somaxconn"]) == before
    finally:
        changed = {k: v for k, v in saved.items() if v is not None and host.read([k])[k] != v}
        host.write(changed)
        assert not changed, f"the namespace target changed host keys {sorted(changed)}"


def test_namespace_scope_is_asked_of_the_kernel(ns):
    """Read-only (rmem_max), absent (tcp_mem) and shared (fs.file-max) entries are global;
    writable per-namespace entries (tcp_rmem, somaxconn) are the namespace's own."""
    t = NetnsTarget(ns.name)
    scope = t.out_of_scope(["net.ipv4.tcp_rmem", "net.core.somaxconn", "net.core.rmem_max",
                            "net.ipv4.tcp_mem", "fs.file-max", "net.ipv4.no_such_key_gx"])
    assert set(scope) == {"net.core.rmem_max", "net.ipv4.tcp_mem", "fs.file-max"}
    assert all(r.startswith("global") for r in scope.values())


def test_rollback_undoes_the_persisted_files(ns, tmp_path, monkeypatch, gridxfer_home, capsys):
    """A file --persist created is removed; one that existed before gets its old text back,
    also when the second apply changed no value; a failed apply leaves no file behind."""
    from gridxfer.cli.main import main
    conf_dir = tmp_path / "sysctl.d"
    conf_dir.mkdir()
    monkeypatch.setenv("GRIDXFER_SYSCTL_DIR", str(conf_dir))
    mine = write_profile(tmp_path, "mine", "net.ipv4.tcp_sack = 0\n")
    theirs = conf_dir / "90-gridxfer-legacy.conf"
    theirs.write_text("# kept by the admin\nnet.ipv4.tcp_sack = 1\n")
    ns.exec("sysctl", "-q", "-w", "net.ipv4.tcp_sack=1")
    before = snapshot(ns)
    host = ["--host", f"netns:{ns.name}"]
    assert main(["tune", "apply", mine, "--persist", *host]) == 0
    legacy = write_profile(tmp_path, "legacy", "net.ipv4.tcp_sack = 0\n")   # nothing to change
    assert main(["tune", "apply", legacy, "--persist", *host]) == 0
    assert (conf_dir / "90-gridxfer-mine.conf").exists()
    assert "net.ipv4.tcp_sack = 0" in theirs.read_text()
    capsys.readouterr()
    assert main(["tune", "rollback", *host]) == 0
    assert f"undid {conf_dir / '90-gridxfer-mine.conf'}" in capsys.readouterr().out
    assert sorted(p.name for p in conf_dir.iterdir()) == ["90-gridxfer-legacy.conf"]
    assert theirs.read_text() == "# kept by the admin\nnet.ipv4.tcp_sack = 1\n"
    assert snapshot(ns) == before
    # a failed apply leaves neither values nor a file behind
    bad = write_profile(tmp_path, "bad", "net.ipv4.tcp_sack = 0\nnet.ipv4.tcp_syn_retries = 500\n")
    assert main(["tune", "apply", bad, "--persist", *host]) == 1
    assert not (conf_dir / "90-gridxfer-bad.conf").exists() and snapshot(ns) == before


@contextlib.contextmanager
def tiny_tmpfs(path):
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "gxfull", str(path)],
                   check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(path):
    fd = os.open(path / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)


def test_full_disk_under_gridxfer_home(ns, tmp_path, monkeypatch, capsys):
    """One line, exit 1, no traceback; the saved originals survive; a disk that fills up
    during the apply restores the values and keeps the originals for rollback."""
    from gridxfer.cli.main import main
    from gridxfer.errors import GridxferError
    before = snapshot(ns)
    host = ["--host", f"netns:{ns.name}"]
    first = write_profile(tmp_path, "first", "net.ipv4.tcp_sack = 0\n")
    second = write_profile(tmp_path, "second", "net.ipv4.tcp_mtu_probing = 2\n"
                                               "net.ipv4.tcp_sack = 1\n")
    with tiny_tmpfs(tmp_path / "full") as home:
        monkeypatch.setenv("GRIDXFER_HOME", str(home))
        assert main(["tune", "apply", first, *host]) == 0
        state = next((home / "tuning").glob("*.json"))
        saved = state.read_bytes()
        fill(home)
        capsys.readouterr()
        assert main(["tune", "apply", second, *host]) == 1
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1, err
        assert "No space left on device" in err and "nothing written" in err
        assert state.read_bytes() == saved                      # the originals are intact
        assert sorted(p.name for p in (home / "tuning").iterdir()) == sorted(
            [state.name, state.with_suffix(".lock").name])      # no temporary file left
        assert ns.sysctl("net.ipv4.tcp_sack") == "0"
        assert ns.sysctl("net.ipv4.tcp_mtu_probing") == before["net.ipv4.tcp_mtu_probing"]

        class FillsTheDisk(NetnsTarget):
            def write(self, values):
                super().write(values)
                fill(home)

        (home / "filler").unlink()
        monkeypatch.setenv("GRIDXFER_SYSCTL_DIR", str(tmp_path))
        with pytest.raises(GridxferError, match="No space left on device.*restored 2 value"):
            apply(load_profile(second), FillsTheDisk(ns.name), persist=True)
        assert not (tmp_path / "90-gridxfer-second.conf").exists()     # undone as well
        assert ns.sysctl("net.ipv4.tcp_sack") == "0"
        assert ns.sysctl("net.ipv4.tcp_mtu_probing") == before["net.ipv4.tcp_mtu_probing"]
        originals = {o["key"]: o["value"] for o in json.loads(state.read_text())["originals"]}
        assert originals["net.ipv4.tcp_sack"] == before["net.ipv4.tcp_sack"]
        (home / "filler").unlink()
        assert main(["tune", "rollback", *host]) == 0
        assert snapshot(ns) == before


def test_a_namespace_whose_owner_died_in_it_is_removed_by_the_next_one():
    """A test process that crashes inside ``scratch_netns`` cannot clean up: the next
    ``scratch_netns`` removes its namespace, veth and processes, and leaves a live
    owner's namespace alone."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    from gridxfer.testbed import netns as netns_mod
    script = textwrap.dedent("""
        import os, subprocess
        from gridxfer.tuning.testing import scratch_netns
        with scratch_netns() as n:
            subprocess.Popen(["ip", "netns", "exec", n.name, "sleep", "300"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            print(n.name, flush=True)
            os._exit(9)                     # dies inside the block: no clean-up runs
    """)
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           timeout=60)
    left = child.stdout.strip()
    assert child.returncode == 9 and left.startswith("gxtune-"), child.stderr
    try:
        assert netns_mod.exists(left) and netns_mod.pids(left)      # left behind, running
        with scratch_netns() as live:
            assert not netns_mod.exists(left)
            assert subprocess.run(["ip", "link", "show", f"gxth{left[7:]}"],
                                  capture_output=True).returncode != 0    # its veth too
            with scratch_netns():               # a live owner's namespace stays
                assert netns_mod.exists(live.name)
    finally:
        from gridxfer.tuning.testing import _remove
        _remove(left)                           # whatever the assertions found
