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
   the destination choice differs; exclusions on, as in gridxfer), once as the pure
   DNS-alias baseline (round-robin, no exclusions), and once with gridxfer's defaults
   (throughput-aware selection and the adaptive per-link optimizer);
3. makespan and aggregate throughput are compared with the ideal: total bytes / sum of
   the measured capacities.

Pass: throughput-aware >= 90 % of the ideal and >= 1.5x round-robin (both round-robin
rows), judged and written up by ``blackhole_report.py``. Each run appends a record to
bench/results/blackhole.jsonl (not with --no-write).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from gridxfer.units import parse_size

from bench import exit_on_sigterm
from bench.blackhole_report import FAST, MB, SLOW, Row, render


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
                     seconds: float, warmup: float) -> dict[str, float]:
    """Steady aggregate bytes/s of each endpoint, all endpoints loaded at once.

    ``sessions`` transfers per endpoint copy ``src_file`` back to back (same mover and
    checks as the campaign). An endpoint's capacity is the sum over its sessions of
    each session's rate (bytes / seconds of its transfers that started after ``warmup``
    s, since the XRootD throttle lets a fresh server burst). A slow server's transfers
    can take longer than the window, so the run lasts until every session has timed one.
    """
    from gridxfer.campaign.engine.scheduler import default_mover_factory
    from gridxfer.movers.base import TransferParams

    stop = threading.Event()
    lock = threading.Lock()
    spans: dict[tuple[str, int], list[tuple[float, float]]] = {
        (name, k): [] for name in urls for k in range(sessions)}
    default_mover_factory(src_file.as_uri(), next(iter(urls.values())), False)   # load once
    t0 = time.time()

    def session(name: str, k: int) -> None:
        mover = default_mover_factory(src_file.as_uri(), urls[name], False)
        i = 0
        while not stop.is_set():
            dst = f"{urls[name]}cap/{k}-{i}.dat"
            i += 1
            params = TransferParams(streams=1, overwrite=True, timeout=120.0, cancel=stop)
            started = time.time() - t0
            try:
                mover.copy(src_file.as_uri(), dst, params=params)
            except Exception:           # cancelled at the deadline, or a real failure
                continue
            with lock:
                if not stop.is_set():
                    spans[(name, k)].append((started, time.time() - t0))

    threads = [threading.Thread(target=session, args=(name, k), daemon=True)
               for name in urls for k in range(sessions)]
    for th in threads:
        th.start()
    time.sleep(warmup + seconds)
    deadline = time.time() + 60
    while time.time() < deadline:
        with lock:
            timed = all(any(a >= warmup for a, _ in v) for v in spans.values())
        if timed:
            break
        time.sleep(0.2)
    with lock:
        stop.set()
        got = {key: [(a, b) for a, b in v if a >= warmup] for key, v in spans.items()}
    for th in threads:
        th.join(timeout=60)
    caps = {name: 0.0 for name in urls}
    for (name, _), v in got.items():
        busy = sum(b - a for a, b in v)
        if busy > 0:
            caps[name] += len(v) * size / busy
    return caps


def run_selector(label: str, selector: str, optimizer: str, exclusions: bool,
                 pool: dict[str, str], src: Path, workdir: Path, *, max_active: int) -> Row:
    from gridxfer.campaign import runner
    from gridxfer.campaign.journal import store as journal
    from gridxfer.campaign.engine import scheduler
    from gridxfer.campaign.policy.selection import NoExclusions

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
    kw = {} if exclusions else {"exclusion_factory": NoExclusions}
    res = runner.run_campaign(spec, replace=True, selector_name=selector, optimizer_factory=opt,
                              **kw)
    conn = journal.connect(journal.journal_path(name), readonly=True)
    try:
        rows = conn.execute("SELECT endpoint, count(*) FROM files WHERE state = 'done' "
                            "GROUP BY endpoint").fetchall()
        t0 = conn.execute("SELECT min(started) FROM attempts").fetchone()[0] or 0.0
        decisions = tuple((round(ts - t0, 1), d["active"], d["reason"]) for ts, d in (
            (r[0], json.loads(r[1])) for r in conn.execute(
                "SELECT ts, detail FROM events WHERE kind = 'optimizer' ORDER BY id")))
    finally:
        conn.close()
    by_url = {u: n for n, u in pool.items()}
    files = {by_url.get(ep[: -len(label) - 1], ep): n for ep, n in rows}
    return Row(label, selector, optimizer, exclusions, res.state, res.seconds, res.bytes_done,
               files, decisions)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.blackhole",
                                description=__doc__.split("\n")[0])
    p.add_argument("--files", type=int, default=120)
    p.add_argument("--size", type=parse_size, default=parse_size("5MB"))
    p.add_argument("--rate", type=parse_size, default=parse_size("20MB"),
                   help="throttle of the two fast servers, bytes/s")
    p.add_argument("--slow-factor", type=float, default=10.0)
    p.add_argument("--max-active", type=int, default=9)
    p.add_argument("--cap-sessions", type=int, default=3)
    p.add_argument("--cap-seconds", type=float, default=10.0)
    p.add_argument("--cap-warmup", type=float, default=3.0)
    p.add_argument("--selectors", default="round-robin,least-pending,throughput-aware")
    p.add_argument("--no-dns", action="store_true",
                   help="skip the round-robin run without exclusions (the slowest one)")
    p.add_argument("--no-adaptive", action="store_true", help="skip the adaptive-optimizer run")
    p.add_argument("--no-write", action="store_true",
                   help="do not append the run to bench/results/")
    p.add_argument("--keep", action="store_true", help="keep the work dir (journals) for a look")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from bench.common import command_line, shm_parent

    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="gridxfer-bh-", dir=shm_parent()))
    os.chmod(work, 0o755)
    saved_env = dict(os.environ)
    os.environ["GRIDXFER_HOME"] = str(work / "home")
    try:
        return _run(args, command_line("blackhole", argv), work)
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
    inv = localgrid.up(LocalGridSpec(servers=servers, base_parent=str(work)))
    try:
        os.environ.update(inv.client_env())
        pool = {n: inv.endpoints[n].url for n in (*FAST, SLOW)}
        print(f"grid up: {pool}", flush=True)
        caps = measure_capacity(pool, src / "f0000.dat", args.size, sessions=args.cap_sessions,
                                seconds=args.cap_seconds, warmup=args.cap_warmup)
        print("capacities: " + ", ".join(f"{n} {c / MB:.1f} MB/s" for n, c in caps.items()),
              flush=True)
        selectors = args.selectors.split(",")
        runs = [(s, "fixed", True) for s in selectors]
        if "round-robin" in selectors and not args.no_dns:
            runs.insert(0, ("round-robin", "fixed", False))
        if not args.no_adaptive:
            runs.append(("throughput-aware", "adaptive", True))
        rows = []
        for selector, optimizer, excl in runs:
            label = f"{selector}-{optimizer}" + ("" if excl else "-dns")
            row = run_selector(label, selector, optimizer, excl, pool, src, work,
                               max_active=args.max_active)
            print(f"{label}: {row.state} in {row.seconds:.1f} s, {row.rate / MB:.1f} MB/s, "
                  f"files {row.files}", flush=True)
            rows.append(row)
    finally:
        localgrid.down()
    text, goals, figures, ok = render(rows, caps, args.files * args.size, args)
    print()
    print(text)
    if not args.no_write:
        from bench.record import write_record
        config = {k: getattr(args, k) for k in (
            "files", "rate", "slow_factor", "max_active", "cap_sessions", "cap_seconds",
            "cap_warmup", "selectors", "no_dns", "no_adaptive")}
        config["size_bytes"] = args.size
        write_record("blackhole", command, title="Selectors on a pool with one 10x slower server",
                     config=config, figures=figures, goals=goals)
    return 0 if ok else 1


if __name__ == "__main__":
    exit_on_sigterm()
    sys.exit(main())
