"""A network namespace on this host (``ip netns exec NAME ...``)."""
from __future__ import annotations

import os
import re
from collections.abc import Sequence

from ...errors import UsageError
from .base import CommandTarget, RunResult
from .local import run_local

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
