"""The same TCP measurement under two tuning profiles, side by side.

Each profile is applied to *both* hosts' namespaces through the tuning API
(``gridxfer.tuning.api.apply`` on a ``NetnsTarget``, ``skip_global=True``: only
per-namespace keys such as tcp_rmem/tcp_wmem/tcp_congestion_control are written; the
global net.core.* keys are reported as skipped and never touched), the measurement runs,
and the originals are rolled back before the next profile.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gridxfer.errors import UsageError
from gridxfer.netbench import bench


@dataclass(frozen=True)
class ProfileRun:
    profile: str
    applied: tuple[str, ...]        # "key = value" written (or already in place)
    skipped: tuple[str, ...]        # keys not settable in a namespace
    result: bench.TcpResult


@dataclass(frozen=True)
class CompareResult:
    src: str
    dst: str
    before: ProfileRun
    after: ProfileRun
    speedup: float                  # after.avg / before.avg
    png: str | None


@contextlib.contextmanager
def profile_applied(
    profile_name: str, namespaces: list[str]
) -> Iterator[tuple[list[str], list[str]]]:
    """Apply ``profile_name`` to every namespace for the block; roll back afterwards."""
    from gridxfer.tuning import api
    from gridxfer.tuning.targets.netns import NetnsTarget
    profile = api.load_profile(profile_name)
    targets = [NetnsTarget(ns) for ns in namespaces]
    done: list = []
    applied: list[str] = []
    skipped: list[str] = []
    try:
        for target in targets:
            try:
                res = api.apply(profile, target, skip_global=True)
            except api.CrashedApply:            # leftovers of an interrupted run: restore first
                api.rollback(target)
                res = api.apply(profile, target, skip_global=True)
            done.append(target)
            for item in res.items:
                if item.status == "skipped":
                    if item.key not in skipped:
                        skipped.append(item.key)
                elif f"{item.key} = {item.expected}" not in applied:
                    applied.append(f"{item.key} = {item.expected}")
        yield applied, skipped
    finally:
        for target in reversed(done):
            with contextlib.suppress(UsageError):   # nothing changed: nothing to restore
                api.rollback(target)


def compare(src: str, dst: str, *, before: str, after: str, streams: int = 1,
            duration: float = 10.0, repeat: int = 3, omit: float = 0.0,
            png: str | Path | None = None) -> CompareResult:
    a, b = bench.resolve(src), bench.resolve(dst)
    if not a.netns or not b.netns:
        raise UsageError("compare tunes both ends: give two testbed hosts (not 'local', whose "
                         "sysctls are this machine's)")
    namespaces = [a.netns, b.netns]
    runs = []
    for name in (before, after):
        with profile_applied(name, namespaces) as (applied, skipped):
            res = bench.tcp(src, dst, streams=streams, duration=duration, repeat=repeat,
                            omit=omit)
        runs.append(ProfileRun(name, tuple(applied), tuple(skipped), res))
    base = runs[0].result.summary.avg
    speedup = runs[1].result.summary.avg / base if base > 0 else float("inf")
    out = None
    if png:
        from gridxfer.netbench.plot import compare_png
        out = str(compare_png(runs[0], runs[1], Path(png)))
    return CompareResult(src, dst, runs[0], runs[1], speedup, out)


def plan(src: str, dst: str, *, before: str, after: str) -> dict[str, list[dict[str, str]]]:
    """What each profile would set on both namespaces (the --dry-run of compare)."""
    from gridxfer.tuning import api
    from gridxfer.tuning.targets.netns import NetnsTarget
    hosts = [bench.resolve(src), bench.resolve(dst)]
    out: dict[str, list[dict[str, str]]] = {}
    for name in (before, after):
        profile = api.load_profile(name)
        out[name] = [{"target": h.name, "key": it.key, "expected": it.expected,
                      "current": " ".join(str(it.current).split()), "status": it.status}
                     for h in hosts if h.netns
                     for it in api.diff(profile, NetnsTarget(h.netns), skip_global=True)]
    return out
