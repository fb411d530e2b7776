"""Thin, typed wrappers over ``ip``/``tc``/``sysctl`` for network namespaces.

Everything is an argument list (no shell). Failures raise :class:`NetnsError` with the
command and the tool's own one-line complaint.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from gridxfer.errors import GridxferError

NETNS_DIR = Path("/run/netns")
ETC_NETNS = Path("/etc/netns")      # per-namespace /etc overrides (bind-mounted by ip netns exec)
CAP_NET_ADMIN = 12


class NetnsError(GridxferError):
    """An ip/tc command failed while building or tearing down the namespaces."""


def run(
    argv: list[str], *, check: bool = True, timeout: float = 30.0
) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise NetnsError(f"{argv[0]} not found (install iproute2)") from None
    except subprocess.TimeoutExpired:
        raise NetnsError(f"timed out: {' '.join(argv)}") from None
    if check and proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        raise NetnsError(f"{' '.join(argv)}: {msg[-1] if msg else f'exit {proc.returncode}'}")
    return proc


def ip(ns: str | None, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return run(["ip", *(["-n", ns] if ns else []), *args], check=check)


def tc(ns: str | None, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return run(["tc", *(["-n", ns] if ns else []), *args], check=check)


def wrap(ns: str) -> list[str]:
    """Prefix that runs a command inside namespace ``ns``."""
    return ["ip", "netns", "exec", ns]


def has_cap_net_admin() -> bool:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_NET_ADMIN & 1)
    except OSError:
        pass
    return False


def exists(ns: str) -> bool:
    return (NETNS_DIR / ns).exists()


def listing() -> list[str]:
    try:
        return sorted(p.name for p in NETNS_DIR.iterdir())
    except FileNotFoundError:
        return []


def add(ns: str) -> None:
    ip(None, "netns", "add", ns)
    ip(ns, "link", "set", "lo", "up")


def sysctl(ns: str, key: str, value: str) -> None:
    """Set a per-namespace sysctl through /proc/sys inside ``ns``."""
    run([*wrap(ns), "sysctl", "-qw", f"{key}={value}"])


def read_sysctl(ns: str, key: str) -> str:
    return " ".join(run([*wrap(ns), "sysctl", "-n", key]).stdout.split())


def pids(ns: str) -> list[int]:
    """Every process whose network namespace is ``ns``."""
    if not exists(ns):
        return []
    proc = run(["ip", "netns", "pids", ns], check=False)
    return [int(p) for p in proc.stdout.split() if p.isdigit()]


def kill_pids(pid_list: list[int], grace: float = 3.0) -> None:
    """SIGTERM, wait up to ``grace`` seconds, then SIGKILL what is left."""
    alive = []
    for pid in pid_list:
        try:
            os.kill(pid, signal.SIGTERM)
            alive.append(pid)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if _alive(p)]
    for pid in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in alive:               # reap if they are our children
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def _alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][:1] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def delete(ns: str) -> None:
    """Kill every process in ``ns`` and delete it (its veths and TUNs go with it)."""
    if not exists(ns):
        return
    for _ in range(3):
        found = pids(ns)
        if not found:
            break
        kill_pids(found)
    ip(None, "netns", "delete", ns, check=False)


def link_exists(ns: str | None, dev: str) -> bool:
    return ip(ns, "link", "show", "dev", dev, check=False).returncode == 0


def netem_available(probe_ns: str) -> bool:
    """Whether ``tc`` can create a netem qdisc here (tried in a throwaway namespace)."""
    try:
        add(probe_ns)
        ip(probe_ns, "link", "add", "p0", "type", "veth", "peer", "name", "p1")
        return tc(probe_ns, "qdisc", "add", "dev", "p0", "root", "netem", "delay", "1ms",
                  check=False).returncode == 0
    except NetnsError:
        return False
    finally:
        delete(probe_ns)


def remove_etc(ns: str) -> None:
    """Remove ``/etc/netns/<ns>`` (our hosts/resolv.conf overrides) if present."""
    d = ETC_NETNS / ns
    if not d.is_dir():
        return
    for f in d.iterdir():
        f.unlink()
    d.rmdir()
    with contextlib.suppress(OSError):
        ETC_NETNS.rmdir()           # only if nobody else keeps files there
