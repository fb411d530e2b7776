"""Small files: N x 4 KB from local disk to a loopback XRootD server, files/s of gridxfer
vs `xrdcp --parallel A --infiles`.

    .venv/bin/python -m bench.smallfiles --wan ...   (bench.smallwan: across the emulated WAN)
    .venv/bin/python -m bench.smallfiles [--files 5000] [--size 4KB] [--active 8] [--rounds N]
                                         [--checksum on|off|both] [--no-record] [--profile DIR]

gridxfer runs `gridxfer campaign run` (fresh process, concurrency pinned to A) on the
same files and server, back to back with xrdcp. A third row, `xrdcp --posc`, is xrdcp
with the guarantee gridxfer gives by default (the server keeps a file only if its
writer closed it: no partial file after a crash); it is shown for reference, the goal
is against plain xrdcp (``--no-posc-peer`` leaves it out). With checksum on, gridxfer verifies
adler32 at both ends (its default policy) and xrdcp runs with `--cksum adler32`.
``--rounds N`` runs both tools N times, interleaved (the order alternates per round), and
keeps each tool's fastest run: on a shared machine the slower runs measure the load.
``--profile DIR`` records the gridxfer runs with py-spy (all threads, idle included, raw
folded stacks; `.venv/bin/pip install py-spy`) into DIR; the profiler slows them severalfold.
PYSPY_RATE (samples/s, 200), PYSPY_CPU=1 (on-CPU samples only), PYSPY_NATIVE=1 (C frames).
Goal (issue 7): gridxfer >= 1.0x xrdcp --parallel 8.
Each run appends a record to bench/results/smallfiles.jsonl (not with --no-record).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from gridxfer.units import fmt_bytes, parse_size

from bench import exit_on_sigterm
from bench.common import (PYTHON, BenchError, Result, best_of, check_copies, command_line,
                          empty_dir, gridxfer_run, local_grid, make_files, md_table, precompile,
                          ratio, run_timed, shm_parent, write_campaign)
from bench.record import Goal, write_record


def _gridxfer(work: Path, src_dir: Path, dst: str, active: int, checksum: bool,
              profile: str | None) -> float:
    spec = write_campaign(work / "small.yaml", "bench-smallfiles", f"file://{src_dir}/", [dst],
                          streams=1, active=active, checksum=checksum)
    if not profile:
        return gridxfer_run(spec)
    precompile()
    out = Path(profile) / f"smallfiles-gridxfer-{'cksum' if checksum else 'nocksum'}.txt"
    bindir = Path(PYTHON).parent
    pyspy = shutil.which("py-spy") or str(bindir / "py-spy")
    env = os.environ.get
    opts = ["--rate", env("PYSPY_RATE", "200"), "--threads",
            *([] if env("PYSPY_CPU") else ["--idle"]),          # PYSPY_CPU=1: on-CPU only
            *(["--native"] if env("PYSPY_NATIVE") else [])]      # PYSPY_NATIVE=1: C frames
    return run_timed([pyspy, "record", "--format", "raw", *opts,
                      "-o", str(out.with_suffix(".folded")), "--", str(bindir / "gridxfer"),
                      "campaign", "run", str(spec), "--quiet", "--replace"])


def _xrdcp(work: Path, srcs: list[Path], dst: str, active: int, checksum: bool,
           posc: bool = False) -> float:
    listing = work / "xrdcp.list"
    listing.write_text("".join(f"{p}\n" for p in srcs))
    argv = ["xrdcp", "--parallel", str(active), "--silent", "--infiles", str(listing)]
    if posc:
        argv += ["--posc"]
    if checksum:
        argv += ["--cksum", "adler32"]
    return run_timed(argv + [dst])


def _one(tool: str, work: Path, srcs: list[Path], ep, user: str, args: argparse.Namespace,
         cks: bool) -> Result:
    sub = f"small-{tool}"
    dest = empty_dir(Path(ep.data_dir), sub, user)
    try:
        if tool == "gridxfer":
            secs = _gridxfer(work, work / "src", ep.url + sub + "/", args.active, cks,
                             args.profile)
        else:
            secs = _xrdcp(work, srcs, ep.url + sub + "/", args.active, cks,
                          posc=tool == "xrdcp-posc")
        check_copies(dest, args.files, args.size)
        return Result(tool, secs, args.files, args.files * args.size)
    except (BenchError, subprocess.SubprocessError) as exc:
        return Result(tool, 0.0, 0, 0, note=str(exc)[:160], ok=False)
    finally:
        shutil.rmtree(dest, ignore_errors=True)


def main(argv: list[str]) -> int:
    if "--wan" in argv:         # XRootD -> XRootD across the emulated WAN (issue 21)
        from bench import smallwan
        return smallwan.main(argv)
    ap = argparse.ArgumentParser(prog="python -m bench.smallfiles",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--size", type=parse_size, default=parse_size("4KB"))
    ap.add_argument("--active", type=int, default=8)
    ap.add_argument("--checksum", choices=("on", "off", "both"), default="both")
    ap.add_argument("--rounds", type=int, default=1,
                    help="interleaved rounds; the table keeps each tool's best run")
    ap.add_argument("--no-posc-peer", action="store_true",
                    help="leave out the reference row `xrdcp --posc`")
    ap.add_argument("--no-record", action="store_true",
                    help="do not append the run to bench/results/")
    ap.add_argument("--profile", metavar="DIR")
    args = ap.parse_args(argv)
    modes = {"on": [True], "off": [False], "both": [True, False]}[args.checksum]
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)

    shm = shm_parent()
    work = Path(tempfile.mkdtemp(prefix="gridxfer-bench-small-", dir=shm))
    results: list[tuple[bool, list[Result]]] = []
    tools = ["gridxfer", "xrdcp"] + ([] if args.no_posc_peer else ["xrdcp-posc"])
    try:
        srcs = make_files(work / "src", args.files, args.size)
        with local_grid([("dst-xrd", "xrootd")], base_parent=shm) as (inv, _):
            user = inv.extra.get("service_user", "gridxfer")
            ep = inv.endpoints["dst-xrd"]
            for cks in modes:
                runs: dict[str, list[Result]] = {t: [] for t in tools}
                for rnd in range(args.rounds):      # interleaved: the order rotates
                    k = rnd % len(tools)
                    for tool in tools[k:] + tools[:k]:
                        res = _one(tool, work, srcs, ep, user, args, cks)
                        runs[tool].append(res)
                        print(f"{tool:10s} checksum {'on ' if cks else 'off'} {res.seconds:7.1f} s "
                              f"{res.files_per_s:8.0f} files/s {res.note}", flush=True)
                results.append((cks, [best_of(runs[t]) for t in tools]))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    table, goals, refs, figs = render(results, args.active)
    print(table)
    print("\n".join([g.line() for g in goals] + refs))
    if not args.no_record:
        title = (f"loopback XRootD, {args.files:,} x {fmt_bytes(args.size)}, "
                 f"{args.active} at a time"
                 + (f", best of {args.rounds} interleaved rounds" if args.rounds > 1 else ""))
        write_record("smallfiles", command_line("smallfiles", argv), title=title,
                     config={"files": args.files, "size_bytes": args.size,
                             "active": args.active, "checksum": args.checksum,
                             "rounds": args.rounds, "tools": tools},
                     figures={"tools": figs, "references": refs}, goals=goals)
    return 0 if all(g.met for g in goals) else 1


MEDIAN_GOAL = 1.25      # issue 21: 5,000 x 4 KB at 8, gridxfer against xrdcp, by the median


def render(results: list[tuple[bool, list[Result]]], active: int
           ) -> tuple[str, list[Goal], list[str], list[dict]]:
    """The markdown table, the goals, the reference lines (gridxfer against ``xrdcp --posc``,
    not a goal) and each tool's figures (per checksum mode: rounds, best, median, files/s,
    ratio to xrdcp)."""
    rows, goals, refs, figs = [], [], [], []
    for cks, best in results:
        gx, xr = best[0], best[1]
        label = "adler32 both ends" if cks else "none"
        for r in best:
            x = ratio(r.files_per_s, xr.files_per_s) if r.ok and xr.ok else None
            rows.append([r.tool, label, f"{r.seconds:.1f}" if r.ok else "-",
                         f"{r.files_per_s:.0f}" if r.ok else "FAILED",
                         "-" if x is None else f"{x:.2f}", r.note])
            figs.append({"tool": r.tool, "checksum": "adler32" if cks else "none", "ok": r.ok,
                         "rounds_s": r.round_seconds, "best_s": r.seconds if r.ok else None,
                         "median_s": r.median_seconds,
                         "files_per_s": r.files_per_s if r.ok else None, "x_xrdcp": x,
                         "note": r.note})
        goals.append(Goal(f"gridxfer >= 1.0x xrdcp --parallel {active}, checksum {label}",
                          ratio(gx.files_per_s, xr.files_per_s) if gx.ok and xr.ok else 0.0,
                          1.0, unit="x"))
        gm, xm = gx.median_seconds, xr.median_seconds
        goals.append(Goal(f"gridxfer >= {MEDIAN_GOAL}x xrdcp --parallel {active} by the medians "
                          f"(issue 21), checksum {label}",
                          ratio(xm, gm) if gm and xm else 0.0, MEDIAN_GOAL, unit="x"))
        if len(best) > 2 and gx.ok and best[2].ok:
            refs.append(f"reference (not a goal): gridxfer = "
                        f"{ratio(gx.files_per_s, best[2].files_per_s):.2f}x "
                        f"xrdcp --posc, checksum {label} (the same no-partial-file guarantee)")
    table = md_table(["tool", "checksum", "seconds", "files/s", "x xrdcp", "note"], rows)
    return table, goals, refs, figs


if __name__ == "__main__":
    exit_on_sigterm()
    sys.exit(main(sys.argv[1:]))
