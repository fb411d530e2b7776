"""Run records: each benchmark run appends one JSON object to ``bench/results/NAME.jsonl``.

    goal = Goal("dispatch >= 1000 files/s (no-op mover)", 9594.0, 1000.0, unit=" files/s")
    goal.met; goal.line()                       # "GOAL MET: ..." as the benchmark prints it
    write_record("scale", command, title="1,000,000 entries, no-op mover",
                 config={...}, figures={...}, goals=[goal])

A record (one line) has the keys of ``REQUIRED`` and, where there are any, ``title`` and
``notes`` (free text added by hand, e.g. "the peer stalled on kXR_wait"):

    benchmark  the file's name: blackhole, bulk, bulk-wan, smallfiles, scale, netbench
    date       ISO 8601 UTC, when the record was written ("2026-11-23T20:11:00Z"; a date
               alone where the time was not kept)
    commit     the short commit the run measured (taken when the benchmark started), or
               null; ``uncommitted`` is true when src/ or bench/ differed from it
    machine    hostname, cpus, cpu, kernel, python, load (1, 5, 15 min averages)
    command    the exact command line, config its parsed settings
    figures    what was measured: per tool its rounds, best, median and ratios (each
               module's ``figures`` says which keys it writes)
    goals      [{goal, measured, target, unit, at_most, met}]

The records before 2026-11-24 were converted from the markdown BENCHMARKS.md kept until
then: their hostname is null, their date has minutes only, ``recorded_in`` names the commit
that added them there, and ``notes`` keeps what was written beside them.

BENCHMARKS.md says where each goal stands; ``python -m bench --summary`` prints the
latest record of each suite entry to update it from.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import os
import platform
import socket
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
REQUIRED = ("benchmark", "date", "commit", "machine", "command", "config", "figures", "goals")


@dataclass(frozen=True)
class Goal:
    """One goal of a run: ``measured`` against ``target`` (at least, or ``at_most``)."""
    label: str
    measured: float
    target: float
    unit: str = ""
    at_most: bool = False

    @property
    def met(self) -> bool:
        return self.measured <= self.target if self.at_most else self.measured >= self.target

    def line(self) -> str:
        """One plain sentence: met, or not met and by how much."""
        # 4 significant digits: a ratio of 0.996 must not print as "1x" beside a goal of 1x
        shown, want = _num(self.measured) + self.unit, _num(self.target) + self.unit
        if self.met:
            return f"GOAL MET: {self.label} (measured {shown}, goal {want})"
        gap = 0.0
        if self.target:
            gap = ((self.measured / self.target - 1) if self.at_most
                   else (self.target - self.measured) / self.target) * 100
        worse = "above" if self.at_most else "below"
        return (f"GOAL NOT MET: {self.label} (measured {shown}, goal {want}: "
                f"{abs(gap):.1f} % {worse})")

    def as_dict(self) -> dict[str, Any]:
        return {"goal": self.label, "measured": self.measured, "target": self.target,
                "unit": self.unit.strip(), "at_most": self.at_most, "met": self.met}


def _num(x: float) -> str:
    return f"{x:,.4g}" if abs(x) < 1000 else f"{x:,.0f}"


def machine_info() -> dict[str, Any]:
    cpu = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {"hostname": socket.gethostname(), "cpus": os.cpu_count(), "cpu": cpu,
            "kernel": platform.release(), "python": platform.python_version(),
            "load": [round(x, 2) for x in os.getloadavg()]}


def code_version(repo: Path = REPO) -> tuple[str | None, bool]:
    """(short commit of HEAD or None, whether src/ or bench/ differ from it)."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", "-C", str(repo), *args], capture_output=True,
                                  text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    head = git("rev-parse", "--short", "HEAD")
    if not head:
        return None, False
    return head, bool(git("status", "--porcelain", "--", "src", "bench"))


CODE_AT_START = code_version()      # taken when a benchmark starts, not when it records


def clean(value: Any) -> Any:
    """JSON-safe figures: floats rounded to 4 decimals, NaN and infinities as null,
    tuples as lists."""
    if isinstance(value, float):
        return round(value, 4) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


def make_record(benchmark: str, command: str, *, config: dict, figures: dict,
                goals: Sequence[Goal | dict], title: str = "", notes: str = "",
                code: tuple[str | None, bool] | None = None) -> dict[str, Any]:
    commit, dirty = code or CODE_AT_START
    rec: dict[str, Any] = {
        "benchmark": benchmark,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": commit, "uncommitted": dirty, "machine": machine_info(),
        "command": command, "title": title, "config": config, "figures": figures,
        "goals": [g.as_dict() if isinstance(g, Goal) else g for g in goals]}
    if notes:
        rec["notes"] = notes
    return clean(rec)


def append_record(rec: dict[str, Any], directory: Path = RESULTS) -> Path:
    """Append ``rec`` as one line to ``directory/<benchmark>.jsonl``; returns the file."""
    missing = [k for k in REQUIRED if k not in rec]
    if missing:
        raise ValueError(f"record without {', '.join(missing)}")
    line = json.dumps(rec, ensure_ascii=False, allow_nan=False) + "\n"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{rec['benchmark']}.jsonl"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line)
    return path


def write_record(benchmark: str, command: str, *, directory: Path = RESULTS,
                 **kw: Any) -> Path:
    """make_record + append_record; prints where it went."""
    path = append_record(make_record(benchmark, command, **kw), directory)
    print(f"recorded in {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
    return path


def read_records(path: Path) -> list[dict[str, Any]]:
    """Every record of a results file, in file order; ValueError naming file:line on a bad
    line."""
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{n}: not JSON: {exc.msg}") from None
        if not isinstance(rec, dict) or any(k not in rec for k in REQUIRED):
            raise ValueError(f"{path}:{n}: a record needs the keys {', '.join(REQUIRED)}")
        out.append(rec)
    return out
