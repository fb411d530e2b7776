"""Test hosts for the tuning tests: scratch network namespaces and a real sshd inside one.

Everything lives in 198.19.0.0/16 (inside the 198.18.0.0/15 benchmarking range) and in
namespaces named ``gxtune-<random>``; everything is removed on exit, also on failure. A
process that dies inside the block (a crash, kill -9) cannot remove its namespace: each
namespace's owner (pid and start time) is recorded under ``OWNERS``, and the next
``scratch_netns`` removes those whose owner is gone, with what still runs in them.
"""
from __future__ import annotations

import contextlib
import os
import random
import secrets
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from gridxfer.testbed.netns import kill_pids, pids
from gridxfer.testbed.procs import alive, stop_popen, tree

OWNERS = Path("/run/gridxfer-gxtune")     # <namespace name>: "<owner pid> <its start time>"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


@dataclass(frozen=True)
class ScratchNetns:
    name: str
    host_if: str      # veth end in the initial namespace
    ns_if: str        # veth end inside the namespace
    host_addr: str
    ns_addr: str

    def exec(self, *argv: str) -> str:
        return subprocess.run(["ip", "netns", "exec", self.name, *argv], capture_output=True,
                              text=True, check=True).stdout

    def sysctl(self, key: str) -> str:
        """The value read from /proc/sys inside the namespace."""
        return self.exec("cat", "/proc/sys/" + key.replace(".", "/")).strip()


def _free_subnet() -> tuple[str, str]:
    used = _ip("-o", "addr").stdout
    for _ in range(200):
        base = f"198.19.{random.randint(0, 255)}.{random.randrange(0, 256, 4)}"
        a, b, c, d = base.split(".")
        host, ns = f"{a}.{b}.{c}.{int(d) + 1}", f"{a}.{b}.{c}.{int(d) + 2}"
        if f" {host}/" not in used and f" {ns}/" not in used:
            return host, ns
    raise RuntimeError("no free 198.19.x.y/30")


def _remove(name: str) -> None:
    """The namespace ``name`` (``gxtune-<tag>``), its host-side veth and what runs in it."""
    kill_pids(pids(name))
    _ip("link", "del", f"gxth{name.removeprefix('gxtune-')}", check=False)
    _ip("netns", "del", name, check=False)
    (OWNERS / name).unlink(missing_ok=True)


def reap_stale() -> list[str]:
    """Remove the namespaces whose recorded owner no longer runs; their names."""
    gone = []
    for record in sorted(OWNERS.glob("gxtune-*")) if OWNERS.is_dir() else []:
        try:
            pid, ctime = record.read_text().split()
            owner_alive = alive(int(pid), float(ctime))
        except (OSError, ValueError):
            continue
        if not owner_alive:
            _remove(record.name)
            gone.append(record.name)
    return gone


@contextlib.contextmanager
def scratch_netns() -> Iterator[ScratchNetns]:
    reap_stale()
    tag = secrets.token_hex(3)
    name, host_if, ns_if = f"gxtune-{tag}", f"gxth{tag}", f"gxtn{tag}"
    host_addr, ns_addr = _free_subnet()
    OWNERS.mkdir(mode=0o700, exist_ok=True)
    (OWNERS / name).write_text(f"{os.getpid()} {psutil.Process().create_time()!r}\n")
    _ip("netns", "add", name)
    try:
        _ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        _ip("link", "set", ns_if, "netns", name)
        _ip("addr", "add", f"{host_addr}/30", "dev", host_if)
        _ip("link", "set", host_if, "up")
        _ip("-n", name, "addr", "add", f"{ns_addr}/30", "dev", ns_if)
        _ip("-n", name, "link", "set", ns_if, "up")
        _ip("-n", name, "link", "set", "lo", "up")
        yield ScratchNetns(name, host_if, ns_if, host_addr, ns_addr)
    finally:
        # Nothing may outlive the namespace: an sshd session whose peer vanished with the
        # veth would wait for its client forever and keep the namespace alive.
        _remove(name)


@dataclass(frozen=True)
class SshdHost:
    ns: ScratchNetns
    port: int
    key: str            # client private key
    known_hosts: str    # known_hosts that trusts this sshd
    empty_known_hosts: str
    wrong_known_hosts: str   # the address bound to a different key
    workdir: str
    ecdsa_known_hosts: str = ""   # only the server's second host key (ecdsa), not its ed25519

    @property
    def address(self) -> str:
        return self.ns.ns_addr

    def log_tail(self, lines: int = 40) -> str:
        """The end of the server's log (LogLevel VERBOSE: every connection and why it
        ended)."""
        try:
            text = (Path(self.workdir) / "sshd.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def inventory(self, name: str = "gxhost") -> str:
        path = Path(self.workdir) / "inventory.ini"
        path.write_text(
            f"{name} ansible_host={self.address} ansible_port={self.port} ansible_user=root "
            f"ansible_ssh_private_key_file={self.key} ansible_python_interpreter=/usr/bin/python3 "
            f"ansible_ssh_common_args='-o UserKnownHostsFile={self.known_hosts} "
            f"-o StrictHostKeyChecking=yes -o ControlMaster=no'\n", encoding="utf-8")
        return str(path)


def _keygen(path: Path, kind: str = "ed25519") -> tuple[str, str]:
    """A new key pair at ``path``; returns the public key's (type, base64)."""
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path)], check=True)
    kind_name, blob = path.with_suffix(".pub").read_text().split(maxsplit=2)[:2]
    return kind_name, blob


def _wait_port(addr: str, port: int, proc: subprocess.Popen, log_file: Path,
               timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log = log_file.read_text(errors="replace") if log_file.exists() else ""
            raise RuntimeError(f"sshd exited: {proc.stderr.read() if proc.stderr else ''}"
                               f"{log}")
        with socket.socket() as s:
            s.settimeout(0.3)
            if s.connect_ex((addr, port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"sshd did not listen on {addr}:{port}")


@contextlib.contextmanager
def sshd_host(ns: ScratchNetns) -> Iterator[SshdHost]:
    """A real OpenSSH server inside ``ns`` with its own host key and authorized_keys."""
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gxtune-sshd-") as work:
        w = Path(work)
        host_kt, host_kb = _keygen(w / "host_ed25519")
        ecdsa_kt, ecdsa_kb = _keygen(w / "host_ecdsa", "ecdsa")
        other_kt, other_kb = _keygen(w / "other_ed25519")
        cli_kt, cli_kb = _keygen(w / "id_ed25519")
        (w / "authorized_keys").write_text(f"{cli_kt} {cli_kb}\n")
        port = random.randint(20000, 60000)
        entry = f"[{ns.ns_addr}]:{port}"
        (w / "known_hosts").write_text(f"{entry} {host_kt} {host_kb}\n")
        (w / "known_hosts_empty").write_text("")
        (w / "known_hosts_ecdsa").write_text(f"{entry} {ecdsa_kt} {ecdsa_kb}\n")
        (w / "known_hosts_wrong").write_text(f"{entry} {other_kt} {other_kb}\n")
        (w / "sshd_config").write_text("\n".join([
            f"Port {port}", f"ListenAddress {ns.ns_addr}", f"HostKey {w / 'host_ed25519'}",
            f"HostKey {w / 'host_ecdsa'}",
            f"AuthorizedKeysFile {w / 'authorized_keys'}", "PermitRootLogin prohibit-password",
            "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
            "StrictModes no", f"PidFile {w / 'sshd.pid'}", "LogLevel VERBOSE",
            "MaxStartups 50", "MaxSessions 50", "Subsystem sftp internal-sftp"]) + "\n")
        # its log in a file (``SshdHost.log_tail``): a test that fails shows why the server
        # ended a session (tests/integration/conftest.py)
        proc = subprocess.Popen(["ip", "netns", "exec", ns.name, "/usr/sbin/sshd", "-D",
                                 "-E", str(w / "sshd.log"), "-f", str(w / "sshd_config")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _wait_port(ns.ns_addr, port, proc, w / "sshd.log")
            yield SshdHost(ns, port, str(w / "id_ed25519"), str(w / "known_hosts"),
                           str(w / "known_hosts_empty"), str(w / "known_hosts_wrong"), work,
                           str(w / "known_hosts_ecdsa"))
        finally:
            sessions = [p.pid for p in tree(proc.pid)[1:]]  # per-connection children:
            stop_popen(proc)                                # they outlive the listener
            kill_pids(sessions)
