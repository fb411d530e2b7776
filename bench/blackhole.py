"""Black hole benchmark: destination selectors on a pool with one slow server.

    python -m bench.blackhole [--files 120] [--size 5MB] [--rate 20MB] [--slow-factor 10]
                              [--max-active 9] [--no-write]

On the embedded local grid: three XRootD destinations in one pool, all throttled with
the XRootD throttle plugin (two at ``--rate``, one at ``--rate / --slow-factor``) so that
capacities are well defined on a 2-core machine; single-stream transfers (the throttle
misbehaves with several substreams). In the same run:

1. each endpoint's capacity is measured by a short real transfer run (same mover, same
   file size, all three endpoints at once);
2. a campaign of ``--files`` files is run once per selector (fixed concurrency, so only
   the destination choice differs), then once more with throughput-aware selection and
   the adaptive per-link optimizer;
3. makespan and aggregate throughput are compared with the ideal: total bytes / sum of
   the measured capacities.

Pass: throughput-aware >= 90 % of the ideal and >= 1.5x round-robin. The table and the
command are written to BENCHMARKS.md (section "Black hole benchmark").
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from gridxfer.units import fmt_duration, parse_size

MB = 1_000_000
SECTION = "## Black hole benchmark"
FAST, SLOW = ("fast1", "fast2"), "slow"


@dataclass(frozen=True)
class Row:
    label: str
    selector: str
    optimizer: str
    state: str
    seconds: float
    bytes: int
    files: dict[str, int]           # endpoint name -> files written there

    @property
    def rate(self) -> float:
        return self.bytes / self.seconds if self.seconds > 0 else 0.0


def make_sources(root: Path, n: int, size: int, distinct: int = 8) -> Path:
    """``n`` files of ``size`` bytes (hard links to ``distinct`` random contents)."""
    src = root / "src"
    src.mkdir(parents=True)
    blobs = []
    for i in range(min(distinct, n)):
        blob = root / f"blob{i}"
        blob.write_bytes(os.urandom(size))
        blobs.append(blob)
    for i in range(n):
        os.link(blobs[i % len(blobs)], src / f"f{i:04d}.dat")
    os.chmod(root, 0o755)
    os.chmod(src, 0o755)
    return src


def measure_capacity(urls: dict[str, str], src_file: Path, size: int, *, sessions: int,
                     seconds: float) -> dict[str, float]:
    """Aggregate bytes/s each endpoint sustains, all endpoints loaded at once."""
    from gridxfer.campaign.scheduler import default_mover_factory
    from gridxfer.movers.base import TransferParams

    stop = threading.Event()
    lock = threading.Lock()
    credited = {name: 0 for name in urls}          # completed bytes + progress at the end
    progress_seen = [False]
    last_done = {name: 0.0 for name in urls}
    completed = {name: 0 for name in urls}
    t0 = time.time()

    def session(name: str, k: int) -> None:
        mover = default_mover_factory(src_file.as_uri(), urls[name], False)
        i = 0
        while not stop.is_set():
            seen = [0]

            def progress(done: int, total: int | None) -> None:
                if stop.is_set():
                    return
                with lock:
                    progress_seen[0] = True
                    credited[name] += max(0, done - seen[0])
                    seen[0] = max(seen[0], done)

            dst = f"{urls[name]}cap/{k}-{i}.dat"
            i += 1
            params = TransferParams(streams=1, checksum=None, verify="none", overwrite=True,
                                    timeout=120.0, cancel=stop)
            try:
                mover.copy(src_file.as_uri(), dst, params=params, progress=progress)
            except Exception:           # cancelled at the deadline, or a real failure
                continue
            with lock:
                if not stop.is_set():
                    credited[name] += size - seen[0]
                    completed[name] += 1
                    last_done[name] = time.time() - t0

    threads = [threading.Thread(target=session, args=(name, k), daemon=True)
               for name in urls for k in range(sessions)]
    for th in threads:
        th.start()
    time.sleep(seconds)
    with lock:
        stop.set()
        elapsed = time.time() - t0
        snapshot = dict(credited)
    for th in threads:
        th.join(timeout=60)
    if progress_seen[0]:
        return {n: snapshot[n] / elapsed for n in urls}
    # no progress callbacks from this mover: whole files up to the last completion
    return {n: completed[n] * size / last_done[n] if last_done[n] else 0.0 for n in urls}


def run_selector(label: str, selector: str, optimizer: str, pool: dict[str, str], src: Path,
                 workdir: Path, *, max_active: int) -> Row:
    from gridxfer.campaign import journal, runner, scheduler

    name = f"bh-{label}"
    spec = workdir / f"{name}.yaml"
    urls = ", ".join(f'"{u}{label}/"' for u in pool.values())
    spec.write_text(f"""campaign: {name}
source: {{url: "{src.as_uri()}/", files: {{glob: "*.dat"}}}}
destinations:
  - tier: T1
    pool: [{urls}]
    streams: 1
    max_active: {max_active}
    min_active: 1
retries: {{max: 3, backoff: 1s}}
timeout: 600s
""")
    opt = (scheduler.fixed_optimizer_factory if optimizer == "fixed"
           else scheduler.default_optimizer_factory)
    res = runner.run_campaign(spec, replace=True, selector_name=selector, optimizer_factory=opt)
    conn = journal.connect(journal.journal_path(name), readonly=True)
    try:
        rows = conn.execute("SELECT endpoint, count(*) FROM files WHERE state = 'done' "
                            "GROUP BY endpoint").fetchall()
    finally:
        conn.close()
    by_url = {u: n for n, u in pool.items()}
    files = {by_url.get(ep[: -len(label) - 1], ep): n for ep, n in rows}
    return Row(label, selector, optimizer, res.state, res.seconds, res.bytes_done, files)


def render(rows: list[Row], caps: dict[str, float], total: int, args: argparse.Namespace,
           command: str) -> tuple[str, bool]:
    ideal = total / sum(caps.values())
    rr = next((r for r in rows if r.selector == "round-robin"), None)
    lines = [SECTION, "",
             f"Command: `{command}` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}).", "",
             f"Three XRootD destinations in one pool on the local grid, throttled with the XRootD "
             f"throttle plugin: fast1, fast2 at {args.rate / MB:g} MB/s, slow at "
             f"{args.rate / args.slow_factor / MB:g} MB/s; streams 1; {args.files} files of "
             f"{args.size / MB:g} MB from local disk; adler32 verified at both ends.", "",
             "Capacities measured in the same run (all three loaded at once, "
             f"{args.cap_sessions} sessions each, {args.cap_seconds:g} s): "
             + ", ".join(f"{n} {c / MB:.1f} MB/s" for n, c in caps.items())
             + f"; ideal makespan = total bytes / sum = {ideal:.1f} s "
               f"({total / ideal / MB:.1f} MB/s).", "",
             "| selector | concurrency | makespan | aggregate | % of ideal | x round-robin "
             "| files fast1 / fast2 / slow |",
             "|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        vs = f"{r.rate / rr.rate:.2f}x" if rr and rr.rate > 0 else "-"
        per = " / ".join(str(r.files.get(n, 0)) for n in (*FAST, SLOW))
        conc = (f"fixed {args.max_active}" if r.optimizer == "fixed"
                else f"adaptive 1..{args.max_active}")
        lines.append(f"| {r.selector} | {conc} | {fmt_duration(r.seconds)} | "
                     f"{r.rate / MB:.1f} MB/s | {100 * ideal / r.seconds:.0f} % | {vs} | {per} |")
    ta = next((r for r in rows if r.selector == "throughput-aware" and r.optimizer == "fixed"),
              None)
    ok = bool(ta and rr and ta.state == "done" and ideal / ta.seconds >= 0.9
              and ta.rate >= 1.5 * rr.rate)
    verdict = "PASS" if ok else "FAIL"
    if ta and rr:
        lines += ["", f"{verdict}: throughput-aware reached {100 * ideal / ta.seconds:.0f} % of the "
                      f"ideal (target >= 90 %) and {ta.rate / rr.rate:.2f}x round-robin "
                      f"(target >= 1.5x)."]
    return "\n".join(lines) + "\n", ok


def write_section(path: Path, text: str) -> None:
    """Replace (or append) this benchmark's section of BENCHMARKS.md, nothing else."""
    old = path.read_text() if path.exists() else "# gridxfer benchmarks\n"
    start = old.find(SECTION)
    if start < 0:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        end = old.find("\n## ", start + len(SECTION))
        rest = old[end + 1:] if end >= 0 else ""
        new = old[:start] + text + ("\n" + rest if rest else "")
    path.write_text(new)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.blackhole", description=__doc__.split("\n")[0])
    p.add_argument("--files", type=int, default=120)
    p.add_argument("--size", type=parse_size, default=parse_size("5MB"))
    p.add_argument("--rate", type=parse_size, default=parse_size("20MB"),
                   help="throttle of the two fast servers, bytes/s")
    p.add_argument("--slow-factor", type=float, default=10.0)
    p.add_argument("--max-active", type=int, default=9)
    p.add_argument("--cap-sessions", type=int, default=3)
    p.add_argument("--cap-seconds", type=float, default=8.0)
    p.add_argument("--selectors", default="round-robin,least-pending,throughput-aware")
    p.add_argument("--no-adaptive", action="store_true", help="skip the adaptive-optimizer run")
    p.add_argument("--no-write", action="store_true", help="do not touch BENCHMARKS.md")
    p.add_argument("--keep", action="store_true", help="keep the work dir (journals) for a look")
    p.add_argument("--benchmarks", type=Path, default=Path(__file__).resolve().parent.parent
                   / "BENCHMARKS.md")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    command = shlex.join(["python", "-m", "bench.blackhole", *argv])
    work = Path(tempfile.mkdtemp(prefix="gridxfer-bh-"))
    saved_env = dict(os.environ)
    os.environ["GRIDXFER_HOME"] = str(work / "home")
    try:
        return _run(args, command, work)
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def _run(args: argparse.Namespace, command: str, work: Path) -> int:
    from gridxfer.testbed import localgrid
    from gridxfer.testbed.localgrid import LocalGridSpec, ServerSpec

    servers = tuple(ServerSpec(n, "xrootd", "T1", throttle=args.rate) for n in FAST) + (
        ServerSpec(SLOW, "xrootd", "T1", throttle=args.rate / args.slow_factor),)
    src = make_sources(work, args.files, args.size)
    inv = localgrid.up(LocalGridSpec(servers=servers))
    try:
        os.environ.update(inv.client_env())
        pool = {n: inv.endpoints[n].url for n in (*FAST, SLOW)}
        print(f"grid up: {pool}", flush=True)
        caps = measure_capacity(pool, src / "f0000.dat", args.size,
                                sessions=args.cap_sessions, seconds=args.cap_seconds)
        print("capacities: " + ", ".join(f"{n} {c / MB:.1f} MB/s" for n, c in caps.items()),
              flush=True)
        runs = [(s, "fixed") for s in args.selectors.split(",")]
        if not args.no_adaptive:
            runs.append(("throughput-aware", "adaptive"))
        rows = []
        for selector, optimizer in runs:
            label = f"{selector}-{optimizer}"
            row = run_selector(label, selector, optimizer, pool, src, work,
                               max_active=args.max_active)
            print(f"{label}: {row.state} in {row.seconds:.1f} s, {row.rate / MB:.1f} MB/s, "
                  f"files {row.files}", flush=True)
            rows.append(row)
    finally:
        localgrid.down()
    text, ok = render(rows, caps, args.files * args.size, args, command)
    print()
    print(text)
    if not args.no_write:
        write_section(args.benchmarks, text)
        print(f"written to {args.benchmarks}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
