"""Scale: a campaign of 1,000,000 entries with a no-op mover.

Measures, each phase in a fresh interpreter (so peak RSS is per phase):
  plan      spec load, dataset expansion, journal creation (runner.plan), peak RSS
  dispatch  the scheduler's dispatch rate with a mover that returns at once (injected
            through Scheduler(mover_factory=...), the same seam the real movers use)
  status    `gridxfer campaign status NAME` wall time (CLI, fresh process) and in-process
  report    `gridxfer campaign report NAME` wall time (CLI) and in-process build_report

    .venv/bin/python -m bench.scale [--files 1000000] [--dispatch-seconds 30] [--max-active 16]
                                    [--no-record] [--profile DIR]

Goals (issue 7): plan + journal 1 M entries <= 30 s with <= 500 MB RSS; dispatch
>= 1000 files/s; status < 1 s. Each run appends a record to bench/results/scale.jsonl
(not with --no-record).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from bench import exit_on_sigterm
from bench.common import (PYTHON, REPO, BenchError, Stopwatch, child_env, command_line,
                          gridxfer_cmd, md_table, peak_rss, precompile)
from bench.record import Goal, write_record

FILE_SIZE = 1 << 20
NAME = "bench-scale"
MB = 1e6


class NoopMover:
    """A Mover that moves nothing and returns at once: isolates the scheduler's cost."""
    name = "noop"
    schemes = frozenset({"file", "root"})
    pairs = frozenset({("file", "file"), ("file", "root"), ("root", "file"), ("root", "root")})
    tpc_pairs: frozenset[tuple[str, str]] = frozenset()

    def copy(self, src: str, dst: str, *, params, progress=None):
        from gridxfer.movers.base import TransferOutcome
        return TransferOutcome(bytes=FILE_SIZE, seconds=0.0, checksum=None, streams_used=1,
                               mode="noop", mover=self.name)


def write_campaign(work: Path, files: int, max_active: int) -> Path:
    listing = work / "files.txt"
    with open(listing, "w", encoding="utf-8") as fh:
        for i in range(files):
            fh.write(f"run{i // 10000:03d}/f{i:07d}.root {FILE_SIZE}\n")
    pool = ", ".join(f'"file://{work}/dst{k}/"' for k in range(4))
    spec = work / "scale.yaml"
    spec.write_text(
        f"campaign: {NAME}\n"
        f"source: {{url: \"file://{work}/src/\", files: {{from: files.txt}}}}\n"
        f"destinations:\n  - tier: T1\n    pool: [{pool}]\n    max_active: {max_active}\n"
        f"checksum: {{algorithm: adler32, verify: both}}\n"
        f"retries: {{max: 3, backoff: 1s}}\n", encoding="utf-8")
    return spec


# ------------------------------------------------------------------ child phases
def _phase_plan(spec_path: str) -> dict:
    from gridxfer.campaign import runner
    from gridxfer.campaign.spec.dataset import expand
    from gridxfer.campaign.spec.schema import load_spec

    sw = Stopwatch()
    spec = load_spec(spec_path)
    t_load = sw.seconds
    sw = Stopwatch()
    n = sum(1 for _ in expand(spec.source))
    t_expand = sw.seconds
    sw = Stopwatch()
    _, count = runner.plan(spec)
    t_plan = sw.seconds
    return {"load": t_load, "expand": t_expand, "plan": t_plan, "entries": n, "rows": count,
            "rss": peak_rss()}


def _phase_dispatch(seconds: float) -> dict:
    from gridxfer.campaign.journal import store as journal
    from gridxfer.campaign.engine.scheduler import Scheduler
    from gridxfer.campaign.spec.schema import spec_from_dict

    path = journal.journal_path(NAME)
    conn = journal.connect(path)
    spec = spec_from_dict(json.loads(journal.get_meta(conn)["spec"]))
    mover = NoopMover()
    sw = Stopwatch()
    sched = Scheduler(conn, spec, mover_factory=lambda s, d, tpc: mover)
    t_init = sw.seconds
    timer = threading.Timer(seconds, sched.stop.set)
    timer.start()
    sw = Stopwatch()
    try:
        res = sched.run()
    finally:
        timer.cancel()
    wall = sw.seconds
    done = conn.execute("SELECT count(*) FROM files WHERE state = 'done'").fetchone()[0]
    attempts = conn.execute("SELECT count(*) FROM attempts").fetchone()[0]
    conn.close()
    return {"init": t_init, "seconds": wall, "done": res.files_done, "done_db": done,
            "attempts": attempts, "state": res.state, "rss": peak_rss()}


def _phase_read() -> dict:
    from gridxfer.campaign.report.summary import build_report
    from gridxfer.campaign.report.status import campaign_status

    sw = Stopwatch()
    st = campaign_status(NAME)
    t_status = sw.seconds
    sw = Stopwatch()
    rep = build_report(NAME)
    t_report = sw.seconds
    return {"status": t_status, "report": t_report, "files": sum(st.files.values()),
            "report_done": rep.files_done, "rss": peak_rss()}


def _child(argv: list[str]) -> int:
    phase, arg = argv[0], argv[1] if len(argv) > 1 else ""
    prof_dir = os.environ.get("BENCH_PROFILE_DIR")
    profiler = None
    if prof_dir:
        from pyinstrument import Profiler
        profiler = Profiler(interval=0.001)
        profiler.start()
    if phase == "plan":
        out = _phase_plan(arg)
    elif phase == "dispatch":
        out = _phase_dispatch(float(arg))
    else:
        out = _phase_read()
    if profiler is not None:
        profiler.stop()
        Path(prof_dir, f"scale-{phase}.txt").write_text(
            profiler.output_text(unicode=False, color=False, show_all=False))
    print(json.dumps(out))
    return 0


def _run_child(env: dict, *args: str) -> dict:
    proc = subprocess.run([PYTHON, "-m", "bench.scale", "--child", *args], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise BenchError(f"phase {args[0]} failed: {proc.stderr.strip()[-800:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _cli_seconds(env: dict, *args: str, repeat: int = 3) -> float:
    """Best of ``repeat`` wall times of a gridxfer CLI call (fresh process each time)."""
    best = float("inf")
    precompile()
    for _ in range(repeat):
        sw = Stopwatch()
        proc = subprocess.run([*gridxfer_cmd(), *args], env=env, capture_output=True, text=True,
                              timeout=600)
        if proc.returncode not in (0, 3, 4):
            raise BenchError(f"gridxfer {' '.join(args)}: exit {proc.returncode}: "
                             f"{proc.stderr.strip()[-400:]}")
        best = min(best, sw.seconds)
    return best


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--child":
        return _child(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--dispatch-seconds", type=float, default=30.0)
    ap.add_argument("--max-active", type=int, default=16)
    ap.add_argument("--no-record", action="store_true",
                    help="do not append the run to bench/results/")
    ap.add_argument("--profile", metavar="DIR", help="pyinstrument profile of each phase into DIR")
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="gridxfer-bench-scale-"))
    env = child_env(GRIDXFER_HOME=str(work / "home"))
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
        env["BENCH_PROFILE_DIR"] = str(Path(args.profile).resolve())
    try:
        sw = Stopwatch()
        spec = write_campaign(work, args.files, args.max_active)
        t_write = sw.seconds
        print(f"wrote a {args.files:,}-entry list file in {t_write:.1f} s", flush=True)
        plan = _run_child(env, "plan", str(spec))
        print(f"plan: {plan}", flush=True)
        disp = _run_child(env, "dispatch", str(args.dispatch_seconds))
        print(f"dispatch: {disp}", flush=True)
        read = _run_child(env, "read")
        print(f"read: {read}", flush=True)
        cli_status = _cli_seconds(env, "campaign", "status", NAME)
        cli_report = _cli_seconds(env, "campaign", "report", NAME)
        cli_version = _cli_seconds(env, "--help")
        jsize = sum(f.stat().st_size for f in (work / "home" / "campaigns").glob(f"{NAME}*"))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    rate = disp["done"] / disp["seconds"] if disp["seconds"] else 0.0
    figs = {
        "spec_load_s": plan["load"], "expand_s": plan["expand"],
        "expand_entries_per_s": plan["entries"] / plan["expand"] if plan["expand"] else None,
        "plan_s": plan["plan"],
        "plan_rows_per_s": plan["rows"] / plan["plan"] if plan["plan"] else None,
        "plan_peak_rss_mb": plan["rss"] / MB, "journal_mb": jsize / MB,
        "scheduler_start_s": disp["init"], "dispatch_files_per_s": rate,
        "dispatch_files": disp["done"], "dispatch_s": disp["seconds"],
        "dispatch_peak_rss_mb": disp["rss"] / MB, "status_ms": read["status"] * 1000,
        "status_cli_ms": cli_status * 1000, "help_cli_ms": cli_version * 1000,
        "report_ms": read["report"] * 1000, "report_attempts": disp["attempts"],
        "report_cli_ms": cli_report * 1000}
    table, goals = render(figs, args.files, args.max_active)
    print(table)
    print("\n".join(g.line() for g in goals))
    if not args.no_record:
        write_record("scale", command_line("scale", argv),
                     title=f"{args.files:,} entries, no-op mover",
                     config={"files": args.files, "dispatch_seconds": args.dispatch_seconds,
                             "max_active": args.max_active},
                     figures=figs, goals=goals)
    return 0 if all(g.met for g in goals) else 1


def render(f: dict, files: int, max_active: int) -> tuple[str, list[Goal]]:
    """The markdown table and the goals from a run's figures (``figs`` in main)."""
    rows = [
        ["spec load (list file referenced)", f"{f['spec_load_s']:.3f} s", ""],
        ["dataset expansion alone", f"{f['expand_s']:.2f} s",
         f"{f['expand_entries_per_s'] or 0:,.0f} entries/s"],
        ["plan: expansion + journal (1 transaction)", f"{f['plan_s']:.2f} s",
         f"{f['plan_rows_per_s'] or 0:,.0f} rows/s"],
        ["peak RSS, plan process", f"{f['plan_peak_rss_mb']:.0f} MB", ""],
        ["journal size on disk", f"{f['journal_mb']:.0f} MB", ""],
        [f"scheduler start on the {files:,}-row journal", f"{f['scheduler_start_s']:.3f} s", ""],
        [f"dispatch, no-op mover, max_active {max_active}",
         f"{f['dispatch_files_per_s']:,.0f} files/s",
         f"{f['dispatch_files']:,} files in {f['dispatch_s']:.1f} s"],
        ["peak RSS, dispatch process", f"{f['dispatch_peak_rss_mb']:.0f} MB", ""],
        ["status (in-process)", f"{f['status_ms']:.0f} ms", ""],
        ["`gridxfer campaign status` (CLI, fresh process)", f"{f['status_cli_ms']:.0f} ms",
         f"`gridxfer --help` alone: {f['help_cli_ms']:.0f} ms"],
        ["report (in-process, build_report)", f"{f['report_ms']:.0f} ms",
         f"{f['report_attempts']:,} attempts"],
        ["`gridxfer campaign report` (CLI, fresh process)", f"{f['report_cli_ms']:.0f} ms", ""],
    ]
    goals = [
        Goal(f"plan+journal {files:,} entries <= 30 s", f["spec_load_s"] + f["plan_s"], 30.0,
             unit=" s", at_most=True),
        Goal("plan peak RSS <= 500 MB", f["plan_peak_rss_mb"], 500.0, unit=" MB", at_most=True),
        Goal("dispatch >= 1000 files/s (no-op mover)", f["dispatch_files_per_s"], 1000.0,
             unit=" files/s"),
        Goal("`campaign status` < 1 s (CLI)", f["status_cli_ms"] / 1000, 1.0, unit=" s",
             at_most=True),
    ]
    return md_table(["measure", "value", "detail"], rows), goals


if __name__ == "__main__":
    exit_on_sigterm()
    sys.exit(main(sys.argv[1:]))
