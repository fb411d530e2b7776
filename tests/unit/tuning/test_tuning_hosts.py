"""--host syntax."""
from __future__ import annotations

import pytest

from gridxfer.errors import UsageError
from gridxfer.tuning.hosts import SshOptions, make_target
from gridxfer.tuning.targets.ansible import AnsibleTarget
from gridxfer.tuning.targets.local import LocalTarget
from gridxfer.tuning.targets.ssh import SshTarget


def test_kinds():
    assert isinstance(make_target("local"), LocalTarget)
    t = make_target("ssh:ops@se01.example.org:2222", ssh=SshOptions(sudo=True))
    assert isinstance(t, SshTarget) and (t.user, t.host, t.port, t.sudo) == (
        "ops",
        "se01.example.org",
        2222,
        True,
    )
    assert t.label == "ssh:ops@se01.example.org:2222" and "/" not in t.state_id
    assert make_target("ssh:root@[::1]:22").host == "::1"
    assert make_target("ssh:se01").sudo is (__import__("os").environ.get("USER", "") != "root")
    a = make_target("se01", inventory="inv.ini")
    assert isinstance(a, AnsibleTarget) and a.label == "ansible:se01"
    assert make_target("ansible:se02", inventory="inv.ini").host == "se02"


def test_sudo_and_quoting():
    t = SshTarget("h", user="ops")
    assert t.command_line(["sysctl", "-w", "net.ipv4.tcp_rmem=4096 87380 1; rm -rf /"]) == \
        "sudo -n -- sysctl -w 'net.ipv4.tcp_rmem=4096 87380 1; rm -rf /'"
    assert SshTarget("h", user="root").command_line(["true"]) == "true"


@pytest.mark.parametrize("spec", ["ssh:", "ssh:a b", "ftp:x", "se01", "netns:../x", "ansible:"])
def test_bad(spec):
    with pytest.raises(UsageError):
        make_target(spec)
