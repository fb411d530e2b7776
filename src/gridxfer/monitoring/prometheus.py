"""node_exporter textfile-collector output for campaign, tape and buffer metrics.

``write_textfile(path, samples)`` writes a ``.prom`` file atomically (temp + rename, mode
0644 so node_exporter can read it). Every check accepts ``--prom-file``; for a cron job
without Nagios::

    python -m gridxfer.monitoring.prometheus --prom-file /var/lib/node_exporter/gridxfer.prom \\
        [--campaign NAME ...] [--window 5m] [--cta LOG ...] [--buffer PATH [--capacity SIZE]]
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Iterable

from gridxfer.redact import redact
from gridxfer.state import write_atomic


@dataclass(frozen=True)
class Sample:
    name: str
    value: float
    labels: dict[str, str] = field(default_factory=dict)
    help: str = ""
    type: str = "gauge"


def _esc(value: str) -> str:
    value = redact(value)
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def render(samples: Iterable[Sample]) -> str:
    out: list[str] = []
    seen: set[str] = set()
    for s in sorted(samples, key=lambda s: s.name):
        if s.name not in seen:
            seen.add(s.name)
            if s.help:
                out.append(f"# HELP {s.name} {s.help}")
            out.append(f"# TYPE {s.name} {s.type}")
        labels = ",".join(f'{k}="{_esc(v)}"' for k, v in sorted(s.labels.items()))
        out.append(f"{s.name}{{{labels}}} {_num(s.value)}" if labels
                   else f"{s.name} {_num(s.value)}")
    return "\n".join(out) + "\n"


def write_textfile(path: Path, samples: Iterable[Sample]) -> None:
    """Atomically replace ``path`` (must end in .prom for node_exporter). Its directory
    must exist: node_exporter's textfile directory is never created by a check."""
    write_atomic(Path(path), render(samples), mode=0o644, make_parents=False)


def check_samples(check_name: str, check: Any) -> list[Sample]:
    """The metrics of a finished ``nagiosplugin.Check`` plus its state (0-3)."""
    import re
    labels = {"check": check_name}
    out = [Sample("gridxfer_check_state", float(check.exitcode), labels,
                  "Nagios state of the check: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN")]
    for result in check.results:
        m = result.metric
        if m is None or not isinstance(m.value, (int, float)):
            continue
        metric = re.sub(r"[^a-zA-Z0-9_]", "_", redact(m.name)).strip("_")
        out.append(Sample(f"gridxfer_check_{check_name}_{metric}", float(m.value), labels))
    return out


def campaign_samples(paths: list[Path], window: float, now: float | None = None) -> list[Sample]:
    from gridxfer.campaign.journal import store as jr
    from gridxfer.monitoring.sources.journal import window_throughput
    now = time.time() if now is None else now
    out: list[Sample] = []
    for path in paths:
        name = path.stem
        wt = window_throughput([path], window, now=now)
        lab = {"campaign": name}
        out.append(Sample("gridxfer_campaign_throughput_bytes_per_second", wt.rate, lab,
                          f"bytes/s over the last {window:g}s"))
        out.append(Sample("gridxfer_campaign_transfers_active", float(wt.active), lab))
        for ep, rate in wt.endpoint_rates().items():
            out.append(Sample("gridxfer_campaign_endpoint_bytes_per_second", rate,
                              {**lab, "endpoint": ep}))
        conn = jr.connect(path, readonly=True)
        try:
            for row in conn.execute("SELECT state, COUNT(*) AS n, COALESCE(SUM(size),0) AS b "
                                    "FROM files GROUP BY state"):
                out.append(Sample("gridxfer_campaign_files", float(row["n"]),
                                  {**lab, "state": row["state"]}))
                out.append(Sample("gridxfer_campaign_bytes", float(row["b"]),
                                  {**lab, "state": row["state"]}))
        finally:
            conn.close()
    return out


def tape_samples(tw: Any) -> list[Sample]:
    out = [Sample("gridxfer_tape_write_bytes_per_second", tw.rate, {},
                  "sum over drives of bytes/busy time, sessions finished in the window"),
           Sample("gridxfer_tape_volume_bytes_per_second", tw.volume_rate),
           Sample("gridxfer_tape_active_drives", float(tw.units)),
           Sample("gridxfer_tape_sessions", float(tw.sessions))]
    out += [Sample("gridxfer_tape_drive_bytes_per_second", r, {"drive": u})
            for u, r in tw.per_unit.items()]
    return out


def buffer_samples(path: Path, used: float, capacity: float) -> list[Sample]:
    lab = {"path": str(path)}
    return [Sample("gridxfer_buffer_used_bytes", used, lab),
            Sample("gridxfer_buffer_capacity_bytes", capacity, lab)]


def main(argv: list[str] | None = None) -> int:
    from gridxfer.errors import GridxferError
    from gridxfer.units import parse_duration, parse_size
    from gridxfer.monitoring.sources import cta, dcache, jsonl
    from gridxfer.monitoring.sources.journal import journal_paths
    from gridxfer.monitoring.sources.tapelog import aggregate
    from gridxfer.monitoring.sources.taperead import read_sessions
    p = argparse.ArgumentParser(prog="python -m gridxfer.monitoring.prometheus",
                                description="Write gridxfer metrics for node_exporter.")
    p.add_argument("--prom-file", type=Path, required=True)
    p.add_argument("--campaign", action="append", default=[])
    p.add_argument("--all-campaigns", action="store_true")
    p.add_argument("--window", default="5m")
    p.add_argument("--cta", action="append", type=Path, default=[])
    p.add_argument("--dcache", action="append", type=Path, default=[])
    p.add_argument("--jsonl", action="append", type=Path, default=[])
    p.add_argument("--buffer", type=Path)
    p.add_argument("--capacity")
    args = p.parse_args(argv)
    try:
        window = parse_duration(args.window)
        now = time.time()
        samples: list[Sample] = []
        paths = journal_paths() if args.all_campaigns else \
            [q for c in args.campaign for q in journal_paths(c)]
        samples += campaign_samples(paths, window, now)
        sources = [(q, cta.parser()) for q in args.cta] + [(q, dcache.parse) for q in args.dcache]
        sources += [(q, jsonl.parse) for q in args.jsonl]
        if sources:
            sessions, _ = read_sessions(sources, None, keep_after=now - window)
            samples += tape_samples(aggregate(sessions, now=now, window=window, min_volume=0))
        if args.buffer:
            if args.capacity:
                used = float(sum(f.stat().st_size for f in args.buffer.rglob("*") if f.is_file()))
                cap = float(parse_size(args.capacity))
            else:
                st = os.statvfs(args.buffer)
                cap = float(st.f_blocks * st.f_frsize)
                used = cap - st.f_bavail * st.f_frsize
            samples += buffer_samples(args.buffer, used, cap)
        write_textfile(args.prom_file, samples)
    except (GridxferError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
