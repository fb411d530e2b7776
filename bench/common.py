"""Shared helpers for the benchmarks: timing, running peers, tables, goals, the local grid.
Records of runs are written by ``bench.record`` (bench/results/*.jsonl).

    sw = Stopwatch(); ...; sw.seconds
    seconds = run_timed(["xrdcp", ...], env=env)          # raises BenchError on failure
    md_table(["tool", "s"], [["xrdcp", "1.2"]])            # GitHub markdown table
    ratio(value, best)                                     # value / best (0 when best is 0)
    goal_line("dispatch >= 1000 files/s", 1234.0, 1000.0)  # "GOAL MET ..." / "GOAL NOT MET ..."
    local_grid(servers, base_parent=...)                   # real XRootD/GridFTP on loopback
"""
from __future__ import annotations

import contextlib
import functools
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterator, Sequence

from bench.record import REPO, Goal

PYTHON = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv").exists() else sys.executable


def child_env(base: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
    """The environment of a child process that must run THIS checkout's gridxfer and bench:
    REPO/src and REPO first on PYTHONPATH (a fresh clone has no install, and an installed
    venv's gridxfer may be another tree's), then the PYTHONPATH there was."""
    env = dict(os.environ if base is None else base)
    paths = [str(REPO / "src"), str(REPO),
             *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env.update(extra)
    return env


def gridxfer_cmd() -> list[str]:
    """The command that starts this checkout's CLI (with ``child_env``): ``python -m
    gridxfer``, not a console script beside PYTHON (absent in a fresh clone, or another
    tree's in an installed venv)."""
    return [PYTHON, "-m", "gridxfer"]


class BenchError(RuntimeError):
    """A benchmark step failed (a peer or gridxfer exited non-zero, a tool is missing)."""


class Stopwatch:
    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.t0


@dataclass(frozen=True)
class Result:
    """One tool's run: what moved and how long it took. From ``best_of``: the best round,
    with every round's seconds (None: failed) and the median of the successful ones."""
    tool: str
    seconds: float
    files: int
    nbytes: int
    note: str = ""
    ok: bool = True
    rounds: tuple[float | None, ...] = ()
    median: float | None = None

    @property
    def files_per_s(self) -> float:
        return self.files / self.seconds if self.seconds > 0 else 0.0

    @property
    def bytes_per_s(self) -> float:
        return self.nbytes / self.seconds if self.seconds > 0 else 0.0

    @property
    def round_seconds(self) -> list[float | None]:
        """Every round's seconds (None: failed); a single run is its own round."""
        return list(self.rounds) or [self.seconds if self.ok else None]

    @property
    def median_seconds(self) -> float | None:
        return self.median if self.median is not None else (self.seconds if self.ok else None)


@functools.cache
def precompile() -> None:
    """Byte-compile gridxfer (once per bench process), so the timed ``gridxfer`` processes
    load cached bytecode as an installed package does (with PYTHONDONTWRITEBYTECODE set, an
    editable install would recompile every module at every start: ~0.1 s per run)."""
    import compileall
    compileall.compile_dir(str(Path(__file__).resolve().parents[1] / "src"), quiet=1)


def run_timed(argv: Sequence[str], *, env: dict[str, str] | None = None,
              timeout: float = 1800.0, cwd: str | None = None) -> float:
    """Run argv (no shell), return wall seconds; BenchError with the tail of its output
    if it exits non-zero."""
    if shutil.which(argv[0]) is None and not os.path.exists(argv[0]):
        raise BenchError(f"{argv[0]}: not installed")
    sw = Stopwatch()
    proc = subprocess.run(list(argv), env=env, cwd=cwd, timeout=timeout,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace")
    secs = sw.seconds
    if proc.returncode != 0:
        tail = " | ".join(proc.stdout.strip().splitlines()[-3:])
        raise BenchError(f"{shlex.join(argv[:3])}... exit {proc.returncode}: {tail[-400:]}")
    return secs


def peak_rss() -> int:
    """Peak resident set size in bytes of this process since it started (exec).

    ``VmHWM`` from /proc, not ``getrusage().ru_maxrss``: Linux carries ru_maxrss across
    fork and exec, so a benchmark phase started by a parent holding 170 MB reported
    170 MB whatever it used itself (seen in `make bench`: scale's plan and dispatch
    children both "peaked" at exactly the parent's size). ru_maxrss only where /proc has
    no VmHWM."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024          # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def md_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(cells[0]), sep] + [line(r) for r in cells[1:]])


def ratio(value: float, best: float) -> float:
    return value / best if best > 0 else 0.0


def goal_line(label: str, measured: float, target: float, *, higher_is_better: bool = True,
              unit: str = "") -> str:
    """One plain sentence: met, or not met and by how much (``Goal.line``)."""
    return Goal(label, measured, target, unit, at_most=not higher_is_better).line()


def command_line(module: str, argv: Sequence[str]) -> str:
    return shlex.join([".venv/bin/python", "-m", f"bench.{module}", *argv])


# ------------------------------------------------------------------ data and the local grid
def best_of(runs: list[Result]) -> Result:
    """The fastest successful run (the machine is shared: slower runs measure the load)."""
    ok = [r for r in runs if r.ok]
    if not ok:
        return runs[-1]
    best = min(ok, key=lambda r: r.seconds)
    if len(runs) == 1:
        return best
    median = statistics.median(r.seconds for r in ok)
    note = (f"best of {len(runs)}: "
            + "/".join(f"{r.seconds:.1f}" if r.ok else "fail" for r in runs)
            + f" s, median {median:.2f} s")   # best-of alone can hide a steady gap
    return Result(best.tool, best.seconds, best.files, best.nbytes, note=note,
                  rounds=tuple(r.seconds if r.ok else None for r in runs), median=median)


def empty_dir(data_dir: Path, sub: str, user: str) -> Path:
    """A fresh, empty ``data_dir/sub`` owned by the servers' ``user`` (a destination)."""
    from gridxfer.testbed.xrootd import chown_tree
    d = data_dir / sub
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    chown_tree(d, user)
    return d


def make_files(directory: Path, count: int, size: int, prefix: str = "f") -> list[Path]:
    """``count`` files of ``size`` bytes of incompressible data, each different."""
    directory.mkdir(parents=True, exist_ok=True)
    block = os.urandom(min(size, 1 << 20) or 1)
    out = []
    for i in range(count):
        p = directory / f"{prefix}{i:06d}.dat"
        with open(p, "wb") as fh:
            head = f"{i:016d}".encode()
            left = size
            first = True
            while left > 0:
                chunk = (head + block[len(head):]) if first else block
                fh.write(chunk[:left])
                left -= min(left, len(chunk))
                first = False
        out.append(p)
    return out


def shm_parent(need: int = 0) -> str:
    """Where benchmark data lives: /dev/shm when it has room (keeps the disk out of it),
    at least 8 GiB and twice ``need`` bytes (tmpfs is memory: 160 x 64 MB of sources,
    their copies and an HTTP-TPC source would not fit a 23 GB VM's)."""
    with contextlib.suppress(OSError):
        st = os.statvfs("/dev/shm")
        if st.f_bavail * st.f_frsize > max(8 << 30, 2 * need):
            return "/dev/shm"
    return tempfile.gettempdir()


@contextlib.contextmanager
def env_vars(values: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def local_grid(servers: Sequence[tuple[str, str]], *, base_parent: str | None = None) -> Iterator:
    """Bring up real servers [(name, kind)] on loopback under a private $GRIDXFER_HOME
    with its own test CA; the client env is set in os.environ. Yields (inventory, home)."""
    from gridxfer.testbed import ca, localgrid
    from gridxfer.testbed.xrootd import ensure_user

    work = Path(tempfile.mkdtemp(prefix="gridxfer-bench-"))
    os.chmod(work, 0o755)
    home = work / "home"
    home.mkdir(mode=0o700)
    gsi = ca.make_test_ca(str(work / "ca"), local_user=ensure_user())
    spec = localgrid.LocalGridSpec(
        servers=tuple(localgrid.ServerSpec(n, k, "BENCH") for n, k in servers),
        base_parent=base_parent, gsi=gsi)
    with env_vars({"GRIDXFER_HOME": str(home), **localgrid.client_env(gsi)}):
        try:
            yield localgrid.up(spec), home
        finally:
            localgrid.down()
            shutil.rmtree(work, ignore_errors=True)


def write_campaign(path: Path, name: str, src_url: str, pool: Sequence[str], *, streams: int,
                   active: int, checksum: bool, glob: str = "*.dat") -> Path:
    """A campaign file with concurrency pinned to ``active`` (min_active = max_active), so
    gridxfer runs exactly the concurrency its peers are given."""
    urls = ", ".join(f'"{u}"' for u in pool)
    check = "{algorithm: adler32, verify: both}" if checksum else "none"
    path.write_text(
        f"campaign: {name}\n"
        f"source: {{url: \"{src_url}\", files: {{glob: \"{glob}\"}}}}\n"
        f"destinations:\n  - tier: BENCH\n    pool: [{urls}]\n    streams: {streams}\n"
        f"    max_active: {active}\n    min_active: {active}\n"
        f"checksum: {check}\nretries: {{max: 0}}\ntimeout: 30m\n", encoding="utf-8")
    return path


def gridxfer_run(spec: Path, *, env: dict[str, str] | None = None) -> float:
    """`gridxfer campaign run SPEC --quiet` in a fresh process (the user's path); seconds."""
    precompile()
    return run_timed([*gridxfer_cmd(), "campaign", "run", str(spec), "--quiet", "--replace"],
                     env=child_env(env))


def check_copies(directory: Path, count: int, size: int) -> None:
    """Every copy is at the destination with the right size (and nothing else)."""
    found = [p for p in directory.rglob("*") if p.is_file()] if directory.exists() else []
    bad = [p.name for p in found if p.stat().st_size != size]
    if len(found) != count or bad:
        raise BenchError(f"{directory}: {len(found)} files (want {count}), wrong size: {bad[:3]}")


def gfal_parallel(argv: list[str], urls: list[str], dest: str, active: int,
                  work: Path, tag: str) -> float:
    """``gfal-copy ARGV --from-file LIST DEST`` in ``active`` processes at once, the URLs
    dealt round-robin into one list file each (``work/<tag><k>.list``); wall seconds of
    the whole, or BenchError with a failed process's error line."""
    procs = []
    sw = Stopwatch()
    for k in range(active):
        share = urls[k::active]
        if not share:
            continue
        listing = work / f"{tag}{k}.list"
        listing.write_text("".join(f"{u}\n" for u in share))
        procs.append(subprocess.Popen(argv + ["--from-file", str(listing), dest],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    outs = [(p.wait(), p.stdout.read() if p.stdout else "") for p in procs]
    secs = sw.seconds
    bad = [o for rc, o in outs if rc != 0]
    if bad:     # the error line, not the progress lines before it (the note keeps 160 chars)
        lines = [ln for ln in bad[0].splitlines() if "rror" in ln] or bad[0].splitlines()
        raise BenchError(f"gfal-copy failed: {(lines or [''])[-1].strip()[-300:]}")
    return secs
