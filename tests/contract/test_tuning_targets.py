"""One contract suite for every TuningTarget: local, netns, ssh (real sshd), ansible.

Namespaced targets are checked against /proc/sys read inside the namespace; the local
target touches one host key (tcp_mtu_probing) and always restores it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gridxfer.tuning.settings import same
from gridxfer.tuning.targets.ansible import AnsibleTarget
from gridxfer.tuning.targets.base import WriteFailed
from gridxfer.tuning.targets.local import LocalTarget
from gridxfer.tuning.targets.netns import NetnsTarget
from gridxfer.tuning.targets.ssh import SshTarget
from gridxfer.tuning.testing import scratch_netns, sshd_host

pytestmark = [pytest.mark.root, pytest.mark.integration]
KEY = "net.ipv4.tcp_mtu_probing"
KINDS = ["local", "netns", "ssh", "ansible"]


@pytest.fixture(scope="module")
def testhost():
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2")
    with scratch_netns() as ns, sshd_host(ns) as sshd:
        yield ns, sshd


@pytest.fixture(params=KINDS)
def target(request, testhost):
    ns, sshd = testhost
    kind = request.param
    if kind == "local":
        request.getfixturevalue("host_sysctl_lock")             # a host key: one run at a time
        t = LocalTarget()
        reader = lambda key: Path("/proc/sys", key.replace(".", "/")).read_text().strip()  # noqa: E731
    else:
        reader = ns.sysctl
        if kind == "netns":
            t = NetnsTarget(ns.name)
        elif kind == "ssh":
            t = SshTarget(sshd.address, user="root", port=sshd.port, key_filename=sshd.key,
                          known_hosts=sshd.known_hosts)
        else:
            t = AnsibleTarget("gxhost", sshd.inventory(),
                              runtime_file=f"{sshd.workdir}/runtime.conf")
    before = reader(KEY)
    try:
        yield kind, t, reader
    finally:
        t.close()
        if kind == "local":
            with open("/proc/sys/net/ipv4/tcp_mtu_probing", "w") as fh:
                fh.write(before)
        else:
            ns.exec("sysctl", "-q", "-w", f"{KEY}={before}")
        assert reader(KEY) == before


def test_read_existing_and_missing_keys(target):
    kind, t, reader = target
    got = t.read(["net.ipv4.tcp_rmem", KEY, "net.ipv4.no_such_key_gx"])
    assert same(got["net.ipv4.tcp_rmem"], reader("net.ipv4.tcp_rmem"))
    assert len(got["net.ipv4.tcp_rmem"].split()) == 3
    assert got[KEY] == reader(KEY)
    assert got["net.ipv4.no_such_key_gx"] is None


def test_write_then_read_back(target):
    kind, t, reader = target
    new = "2" if reader(KEY) != "2" else "1"
    t.write({KEY: new})
    assert reader(KEY) == new
    assert t.read([KEY])[KEY] == new


def test_write_stops_at_the_failing_key_and_names_it(target):
    kind, t, reader = target
    before = reader("net.ipv4.tcp_syn_retries")
    with pytest.raises(WriteFailed) as err:
        t.write({KEY: "1", "net.ipv4.tcp_syn_retries": "500"})     # kernel max is 127
    assert err.value.key == "net.ipv4.tcp_syn_retries"
    assert KEY in err.value.written
    assert reader("net.ipv4.tcp_syn_retries") == before


def test_run_passes_arguments_untouched(target):
    kind, t, _ = target
    res = t.run(["printf", "%s|", "a b", "c;d", "'q'", "x\ty"])
    assert res.ok and res.stdout == "a b|c;d|'q'|x\ty|"
    assert not t.run(["false"]).ok


def test_run_feeds_input(target):
    kind, t, _ = target
    res = t.run(["cat"], input="one two\nthree\n")
    # ansible's command module strips the trailing newline of stdout
    assert res.ok and res.stdout.rstrip("\n") == "one two\nthree"


def test_namespace_detection(target):
    kind, t, _ = target
    assert t.in_child_netns() is (kind != "local")


def test_put_file(target, tmp_path):
    kind, t, _ = target
    dest = tmp_path / "90-gridxfer-x.conf"       # namespaces share the host's file system
    t.put_file(str(dest), "net.ipv4.tcp_mtu_probing = 1\n")
    assert dest.read_text() == "net.ipv4.tcp_mtu_probing = 1\n"


def test_label_and_state_id_are_distinct(testhost):
    ns, sshd = testhost
    ids = {LocalTarget().state_id, NetnsTarget(ns.name).state_id,
           SshTarget(sshd.address, user="root", port=sshd.port).state_id,
           AnsibleTarget("gxhost", "inv").state_id}
    assert len(ids) == 4 and all("/" not in i for i in ids)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert listed.count(ns.name) == 1
