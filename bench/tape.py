"""Tape benchmark: a campaign to a tape-backed tier, end to end, against the drives' aggregate.

    python -m bench.tape [--files 8] [--size 2GB] [--drives 4] [--rate 18MB/s] [--mount 2s]
                         [--max-active 4] [--no-write]

On the embedded local grid: ONE tape-backed XRootD (testbed/tapexrd.py: xrootd's prepare
plugin over the EMULATED drives, ``--drives`` x ``--rate`` with ``--mount`` per mount and
0.5 s positioning per file; a file is migrated once unmodified for 1 s). The source files
are sparse (no disk read time); their copies on the server are real bytes: --files x
--size free under $GRIDXFER_TESTBED_DIR (default /tmp; 16 GB by default), for about 6 min.
A campaign copies them there with ``archive: {timeout: 2h}``: a file is done only once XRootD's
``query prepare`` says it is on tape (movers/xrootd/tape.py, polled in bulk by the
campaign's tape poller).

Figures, all from this run:
- rate to tape once mounted: total bytes / (first mount done -> last byte written), from
  the drives' CTA log (start + mountTime; + positionTime + readWriteTime): whether the
  campaign keeps every drive fed; goal >= 90 % of drives x rate;
- campaign end to end: total bytes / (campaign start -> the last file seen on tape by the
  campaign), against the same aggregate (no goal: it includes the first copies, the first
  mount and the campaign's archive polling, which backs off from 1 s to 60 s per file);
- copied -> on tape per file as the journal has it (``copied``, ``on_tape``: when the
  campaign saw it): p50 / p90 / max; and how long after the last byte was written the
  campaign saw the last file on tape.
Each run appends a record to bench/results/tape.jsonl (not with --no-write).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from gridxfer.units import parse_byterate, parse_duration, parse_size
from bench import exit_on_sigterm

MB = 1_000_000
NAME = "t1-tape"


def sparse_sources(root: Path, n: int, size: int) -> Path:
    src = root / "src"
    src.mkdir(parents=True)
    for i in range(n):
        with open(src / f"f{i:03d}.dat", "wb") as fh:
            fh.truncate(size)
    os.chmod(root, 0o755)
    os.chmod(src, 0o755)
    return src


def write_spec(path: Path, src: Path, dst: str, max_active: int) -> Path:
    path.write_text(f"""campaign: bench-tape
source: {{url: "{src.as_uri()}/", files: {{glob: "*.dat"}}}}
destinations:
  - tier: T1T
    pool: ["{dst}"]
    max_active: {max_active}
    min_active: {max_active}
    archive: {{timeout: 2h}}
retries: {{max: 1, backoff: 5s}}
timeout: 30m
""", encoding="utf-8")
    return path


def drive_span(log: Path) -> tuple[float, float, int] | None:
    """From the drives' CTA log: (first mount done, last write done, bytes written) over the
    ArchiveForUser sessions; a session's writes end at start + mount + position + write."""
    from gridxfer.monitoring.sources import cta
    parse = cta.parser()
    spans = []
    for line in log.read_text(encoding="utf-8").splitlines():
        s = parse(line, log)
        if s is not None and s.write and s.kind == "ArchiveForUser":
            f = {k: float(v) for k, v in re.findall(r'(\w+Time)="([\d.]+)"', line)}
            mounted = s.end - f["totalTime"] + f["mountTime"]
            spans.append((mounted, mounted + f["positionTime"] + f["readWriteTime"], s.bytes))
    if not spans:
        return None
    return min(a for a, _, _ in spans), max(b for _, b, _ in spans), sum(n for _, _, n in spans)


def measure(args: argparse.Namespace, work: Path) -> tuple[dict, list]:
    from bench.common import env_vars
    from bench.record import Goal
    from gridxfer.campaign import runner
    from gridxfer.campaign.journal import store as journal
    from gridxfer.testbed import ca, localgrid
    from gridxfer.testbed.tapexrd import TapeSpec
    from gridxfer.testbed.xrootd import ensure_user

    home = work / "home"
    home.mkdir(mode=0o700)
    gsi = ca.make_test_ca(str(work / "ca"), local_user=ensure_user())
    tape = TapeSpec(drives=args.drives, rate=args.rate, mount=args.mount, position=0.5,
                    min_age=1.0, max_session=3600.0)
    spec = localgrid.LocalGridSpec(servers=(localgrid.ServerSpec(NAME, "xrootd", "T1T",
                                                                 tape=tape),), gsi=gsi)
    src = sparse_sources(work, args.files, args.size)
    total = args.files * args.size
    with env_vars({"GRIDXFER_HOME": str(home), **localgrid.client_env(gsi)}):
        try:
            inv = localgrid.up(dataclasses.replace(spec))
            ep = inv.endpoints[NAME]
            cfile = write_spec(work / "bench-tape.yaml", src, ep.url + "bench/", args.max_active)
            t0 = time.time()
            res = runner.run_campaign(cfile, replace=True)
            t_end = time.time()
            conn = journal.connect(journal.journal_path("bench-tape"), readonly=True)
            try:
                rows = conn.execute("SELECT copied, on_tape FROM files WHERE state = 'done'"
                                    ).fetchall()
            finally:
                conn.close()
            span = drive_span(Path(ep.tape_log))
        finally:
            localgrid.down()
    if res.state != "done" or len(rows) != args.files or span is None or span[2] != total:
        raise RuntimeError(f"campaign ended {res.state} with {len(rows)} of {args.files} on "
                           f"tape; drives logged {span}")
    mounted, written, _ = span
    last = max(r[1] for r in rows)
    waits = sorted(r[1] - r[0] for r in rows)
    aggregate = args.drives * args.rate
    mounted_rate = total / (written - mounted)
    e2e_rate = total / (last - t0)
    figures = {
        "bytes": total, "campaign_seconds": t_end - t0,
        "seen_after_written_s": last - written,
        "rate_once_mounted_MBps": mounted_rate / MB, "rate_end_to_end_MBps": e2e_rate / MB,
        "aggregate_MBps": aggregate / MB,
        "share_once_mounted_pct": 100 * mounted_rate / aggregate,
        "share_end_to_end_pct": 100 * e2e_rate / aggregate,
        "copied_to_on_tape_s": {"p50": statistics.median(waits),
                                "p90": waits[min(len(waits) - 1, int(0.9 * len(waits)))],
                                "max": waits[-1], "all": waits},
    }
    goals = [Goal(f"rate to tape once mounted >= 90 % of {args.drives} x "
                  f"{args.rate / MB:g} MB/s", 100 * mounted_rate / aggregate, 90.0, unit=" %")]
    return figures, goals


def main(argv: list[str] | None = None) -> int:
    from bench.common import command_line
    ap = argparse.ArgumentParser(prog="python -m bench.tape", description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--size", default="2GB")
    ap.add_argument("--drives", type=int, default=4)
    ap.add_argument("--rate", default="18MB/s", help="per drive")
    ap.add_argument("--mount", default="2s")
    ap.add_argument("--max-active", type=int, default=4)
    ap.add_argument("--no-write", action="store_true", help="print only, no record")
    args = ap.parse_args(argv)
    args.size, args.rate = parse_size(args.size), parse_byterate(args.rate)
    args.mount = parse_duration(args.mount)
    parent = os.environ.get("GRIDXFER_TESTBED_DIR", "/tmp")
    work = Path(tempfile.mkdtemp(prefix="gridxfer-bench-tape-", dir=parent))
    os.chmod(work, 0o755)
    try:
        figures, goals = measure(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    w = figures["copied_to_on_tape_s"]
    print(f"{args.files} x {args.size / 1e9:g} GB to a tape-backed xrootd, {args.drives} "
          f"EMULATED drives x {args.rate / MB:g} MB/s (aggregate {figures['aggregate_MBps']:g} "
          f"MB/s)\n"
          f"- rate to tape once mounted: {figures['rate_once_mounted_MBps']:.1f} MB/s "
          f"({figures['share_once_mounted_pct']:.1f} %)\n"
          f"- campaign end to end: {figures['rate_end_to_end_MBps']:.1f} MB/s "
          f"({figures['share_end_to_end_pct']:.1f} %), {figures['campaign_seconds']:.0f} s\n"
          f"- copied -> on tape: p50 {w['p50']:.0f} s, p90 {w['p90']:.0f} s, max {w['max']:.0f} s;"
          f" the last file seen on tape {figures['seen_after_written_s']:.0f} s after it was")
    for g in goals:
        print(g.line())
    if not args.no_write:
        from bench.record import write_record
        write_record("tape", command_line("tape", argv or []),
                     title="campaign to a tape-backed tier (EMULATED drives behind xrootd)",
                     config={"files": args.files, "size": args.size, "drives": args.drives,
                             "rate": args.rate, "mount": args.mount,
                             "max_active": args.max_active},
                     figures=figures, goals=goals)
    return 0 if all(g.met for g in goals) else 1


if __name__ == "__main__":
    exit_on_sigterm()
    sys.exit(main(sys.argv[1:]))
