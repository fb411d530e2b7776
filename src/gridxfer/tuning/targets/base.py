"""The TuningTarget seam: ``read(keys)``, ``write(values)``, ``run(argv)``.

Every target (local, netns, ssh, ansible) implements these three; the engine in
``gridxfer.tuning.engine`` runs validate -> record -> write -> read back -> verify ->
rollback once for all of them. ``CommandTarget`` implements read/write on top of ``run`` with
``grep -H '' /proc/sys/...`` and ``sysctl -w key=value`` so a new target only needs ``run``.
"""
from __future__ import annotations

import abc
import ipaddress
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gridxfer.errors import GridxferError
from gridxfer.tuning.rules import GLOBAL_ONLY

GLOBAL_ONLY_REASON = "global-only key: it belongs to the initial network namespace"
NOT_NET_REASON = ("global key: only net.* keys can belong to a network namespace; writing it "
                  "here would change the whole host")


class TargetError(GridxferError):
    """The target could not be reached or a command on it failed unexpectedly."""


class WriteFailed(GridxferError):
    """Writing ``key`` failed; ``written`` lists the keys already written before it."""

    def __init__(self, key: str, message: str, written: Sequence[str] = ()) -> None:
        self.key, self.reason, self.written = key, message, tuple(written)
        super().__init__(f"{key}: {message}")


@dataclass(frozen=True)
class RunResult:
    argv: tuple[str, ...]
    rc: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def first_error_line(self) -> str:
        text = (self.stderr or self.stdout).strip().splitlines()
        return text[-1] if text else f"exit status {self.rc}"


def proc_path(key: str) -> str:
    return "/proc/sys/" + key.replace(".", "/")


def key_from_path(path: str) -> str:
    return path.removeprefix("/proc/sys/").replace("/", ".")


class TuningTarget(abc.ABC):
    """Where settings are read and written. ``label`` is what users see and type."""

    label: str = "?"

    @property
    def state_id(self) -> str:
        """File-name-safe id for ``$GRIDXFER_HOME/tuning/<state_id>.json``."""
        return re.sub(r"[^A-Za-z0-9_.@\-]", "_", self.label.replace(":", "-"))

    @abc.abstractmethod
    def read(self, keys: Sequence[str]) -> dict[str, str | None]:
        """Current values of sysctl ``keys``; None for a key that does not exist there."""

    @abc.abstractmethod
    def write(self, values: Mapping[str, str]) -> None:
        """Write sysctl values in order; raise WriteFailed at the first failure."""

    @abc.abstractmethod
    def run(self, argv: Sequence[str], *, input: str | None = None) -> RunResult:
        """Run a command (argument list, never a shell string) on the target."""

    def put_file(self, path: str, text: str) -> None:
        """Write a file on the target (used by --persist)."""
        res = self.run(["tee", path], input=text)
        if not res.ok:
            raise TargetError(f"{self.label}: cannot write {path}: {res.first_error_line()}")

    def close(self) -> None:  # noqa: B027  (a default no-op on purpose, not abstract)
        """Release connections; a no-op for local targets."""

    def __enter__(self) -> TuningTarget:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- facts the engine asks every target, built on run() -------------------------------
    def in_child_netns(self) -> bool:
        """True when the target's network namespace is not the initial one (global keys
        cannot be set there)."""
        # In a child namespace the global-only keys are missing (netdev_max_backlog, tcp_mem)
        # or read-only (rmem_max, mode 0444); /proc/1/ns/net is often unreadable in sandboxes.
        cached = self.__dict__.get("_in_child_netns")
        if cached is not None:
            return cached
        res = self.run(["stat", "-c", "%a", "/proc/sys/net/core/rmem_max",
                        "/proc/sys/net/core/netdev_max_backlog"])
        modes = res.stdout.split()
        self.__dict__["_in_child_netns"] = answer = (
            not res.ok or len(modes) != 2 or any(m[0] in "0145" for m in modes))
        return answer

    def stat_entries(self, keys: Sequence[str]) -> dict[str, tuple[int, int]]:
        """``(mode, inode)`` of each key's /proc/sys entry as the target sees it; a key
        missing there is left out."""
        if not keys:
            return {}
        res = self.run(["stat", "-c", "%a %i %n", *(proc_path(k) for k in keys)])
        out: dict[str, tuple[int, int]] = {}
        for line in res.stdout.splitlines():
            mode, ino, name = (line.split(" ", 2) + ["", ""])[:3]
            if name.startswith("/proc/sys/") and mode.isdigit() and ino.isdigit():
                out[key_from_path(name)] = (int(mode, 8), int(ino))
        return out

    def out_of_scope(self, keys: Sequence[str]) -> dict[str, str]:
        """Sysctl keys this target must not write because they are not its own (key ->
        reason, starting with "global"). In a child network namespace these are every key
        outside net.* (the host's kernel.*, vm.*, fs.*), and the net.* keys the namespace
        shows read-only, or does not have while they are known to belong to the initial
        namespace only (``rules.GLOBAL_ONLY``: a remote host cannot be asked)."""
        if not keys:
            return {}
        net = [k for k in keys if k.startswith("net.")]
        probe = ["net.core.rmem_max", "net.core.netdev_max_backlog"]     # see in_child_netns
        seen = self.stat_entries(list(dict.fromkeys(net + probe)))      # one round trip
        if self.__dict__.get("_in_child_netns") is None:
            self.__dict__["_in_child_netns"] = any(k not in seen or not seen[k][0] & 0o200
                                                   for k in probe)
        if not self.in_child_netns():
            return {}
        # kernel.*, vm.*, fs.*: a network namespace (a container) shares them with its host
        out = {k: NOT_NET_REASON for k in keys if not k.startswith("net.")}
        for key in net:
            if key in seen and not seen[key][0] & 0o200:
                out[key] = f"{GLOBAL_ONLY_REASON} (read-only inside this one)"
            elif key not in seen and key in GLOBAL_ONLY:
                out[key] = GLOBAL_ONLY_REASON
        return out

    def session_interfaces(self) -> frozenset[str]:
        """Interfaces that carry the SSH session we depend on (empty when none)."""
        return frozenset()

    def _route_dev(self, address: str) -> str | None:
        try:
            ipaddress.ip_address(address)
        except ValueError:
            return None
        res = self.run(["ip", "-j", "route", "get", address])
        if not res.ok:
            return None
        try:
            routes = json.loads(res.stdout or "[]")
        except json.JSONDecodeError:
            return None
        return routes[0].get("dev") if routes else None


class CommandTarget(TuningTarget):
    """read/write through ``run``: for netns, ssh and anything that can run commands."""

    def read(self, keys: Sequence[str]) -> dict[str, str | None]:
        out: dict[str, str | None] = {k: None for k in keys}
        if not keys:
            return out
        res = self.run(["grep", "-H", "", *(proc_path(k) for k in keys)])
        if res.rc not in (0, 1, 2):
            raise TargetError(f"{self.label}: reading sysctls failed: {res.first_error_line()}")
        for line in res.stdout.splitlines():
            path, sep, value = line.partition(":")
            if sep and path.startswith("/proc/sys/"):
                out[key_from_path(path)] = value
        return out

    def write(self, values: Mapping[str, str]) -> None:
        done: list[str] = []
        for key, value in values.items():
            res = self.run(["sysctl", "-q", "-w", f"{key}={value}"])
            if not res.ok:
                raise WriteFailed(key, res.first_error_line(), done)
            done.append(key)
