"""A network namespace on this host (``ip netns exec NAME ...``).

Only the namespace's own keys are written. ``ip netns exec`` changes nothing but the network
namespace, so fs.*, kernel.*, vm.* (and every other key outside net.*) written there change
the whole host, and so do the net.* keys the kernel registers for the initial namespace only.
Which keys are the namespace's own is asked of the kernel, not of a list: a key is per-namespace
when it lies under net., the namespace's /proc/sys has it and lets it be written, and its entry
is not the host's own. /proc/sys shares one dentry (so one inode) between namespaces for a table
that is not per-namespace, and keeps a separate one per namespace for a per-namespace table; the
host's entry is held open while the namespace's is looked at, so its dentry cannot be recycled.
"""
from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Sequence

from gridxfer.errors import UsageError
from gridxfer.tuning.targets.base import (
    GLOBAL_ONLY_REASON,
    NOT_NET_REASON,
    CommandTarget,
    RunResult,
    proc_path,
)
from gridxfer.tuning.targets.local import run_local

_NS_RE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


class NetnsTarget(CommandTarget):
    def __init__(self, name: str) -> None:
        if not _NS_RE.fullmatch(name):
            raise UsageError(f"not a network namespace name: {name!r}")
        if not os.path.exists(f"/run/netns/{name}"):
            raise UsageError(f"no network namespace {name!r} (see `ip netns list`)")
        self.name = name
        self.label = f"netns:{name}"

    def run(self, argv: Sequence[str], *, input: str | None = None) -> RunResult:
        res = run_local(["ip", "netns", "exec", self.name, *argv], input=input)
        return RunResult(tuple(argv), res.rc, res.stdout, res.stderr)

    def in_child_netns(self) -> bool:
        return True

    def out_of_scope(self, keys: Sequence[str]) -> dict[str, str]:
        out = {k: NOT_NET_REASON for k in keys if not k.startswith("net.")}
        net = [k for k in keys if k.startswith("net.")]
        held: dict[str, int] = {}
        try:
            for key in net:
                with contextlib.suppress(OSError):
                    held[key] = os.open(proc_path(key), os.O_PATH)
            inside = self.stat_entries(net)
            for key in net:
                if key not in inside:
                    if key in held:
                        out[key] = f"{GLOBAL_ONLY_REASON} (absent inside this one)"
                elif not inside[key][0] & 0o200:
                    out[key] = f"{GLOBAL_ONLY_REASON} (read-only inside this one)"
                elif key in held and os.fstat(held[key]).st_ino == inside[key][1]:
                    out[key] = ("global key: the namespace sees the host's own entry; writing it "
                                "here would change the whole host")
        finally:
            for fd in held.values():
                os.close(fd)
        return out
