"""``--host`` syntax -> a TuningTarget.

    local                      this host (default)
    netns:NAME                 network namespace NAME on this host (ip netns exec)
    ssh:[USER@]HOST[:PORT]     over SSH with paramiko (key auth; sudo -n unless USER is root)
    ansible:NAME               inventory host NAME, through playbooks/tune.yml (needs --inventory)
    NAME                       the same as ansible:NAME when --inventory is given
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from gridxfer.errors import UsageError
from gridxfer.tuning.targets.base import TuningTarget

_SSH_RE = re.compile(
    r"(?:(?P<user>[A-Za-z0-9_.\-]+)@)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]+)"
    r"(?::(?P<port>\d{1,5}))?"
)
_NAME_RE = re.compile(r"[A-Za-z0-9_.\-]+")


@dataclass(frozen=True)
class SshOptions:
    key_filename: str | None = None
    known_hosts: str | None = None
    accept_unknown_host_key: bool = False
    sudo: bool | None = None


def make_target(spec: str, *, inventory: str | None = None, ssh: SshOptions = SshOptions(),
                ansible_check: bool = False) -> TuningTarget:
    spec = spec.strip()
    if spec == "local":
        from gridxfer.tuning.targets.local import LocalTarget
        return LocalTarget()
    scheme, sep, rest = spec.partition(":")
    if sep and scheme == "netns":
        from gridxfer.tuning.targets.netns import NetnsTarget
        return NetnsTarget(rest)
    if sep and scheme == "ssh":
        m = _SSH_RE.fullmatch(rest)
        if not m:
            raise UsageError(f"--host {spec!r}: expected ssh:[USER@]HOST[:PORT]")
        port = int(m.group("port") or 22)
        if not 0 < port < 65536:
            raise UsageError(f"--host {spec!r}: port out of range")
        from gridxfer.tuning.targets.ssh import SshTarget
        return SshTarget(m.group("host").strip("[]"), user=m.group("user"), port=port,
                         key_filename=ssh.key_filename, known_hosts=ssh.known_hosts,
                         accept_unknown_host_key=ssh.accept_unknown_host_key, sudo=ssh.sudo)
    if sep and scheme != "ansible":
        raise UsageError(f"--host {spec!r}: unknown kind {scheme!r} "
                         "(use local, netns:NAME, ssh:[USER@]HOST[:PORT], ansible:NAME)")
    name = rest if sep else spec
    if not _NAME_RE.fullmatch(name or ""):
        raise UsageError(f"--host {spec!r}: not a host name")
    if not inventory:
        raise UsageError(f"--host {spec!r}: an inventory host needs --inventory FILE "
                         "(or use local, netns:NAME, ssh:[USER@]HOST[:PORT])")
    from gridxfer.tuning.targets.ansible import AnsibleTarget
    return AnsibleTarget(name, inventory, check=ansible_check)
