"""Nothing partial, ever: a real `gridxfer campaign run` is stopped with SIGINT, a double
SIGINT, SIGTERM or SIGKILL at a random point (seeded), then `campaign resume` finishes
it, on the embedded local grid (real xrootd and GSI GridFTP servers) and local disk:

* ``local-src``: file:// -> XRootD (POSC straight to the final name), GridFTP (gridxfer's
  client, temporary name + rename) and a local directory (temporary name + rename);
* ``xrd-src``: root:// -> XRootD (XrdCl to a temporary name) and a local directory.

Checked after the stop: every temporary name on any destination is journalled
(``attempts.tmp_url``, committed before the first byte). After the resume: every file done
and verified, each destination directory holds exactly the campaign's files (no
``.gxpart`` or partial file anywhere), the journal holds no temporary name still to
remove, and the resume said how many it removed.
"""
from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

GRIDXFER = [sys.executable, "-m", "gridxfer"]
STOPS = {"sigint": (signal.SIGINT,), "double-sigint": (signal.SIGINT, signal.SIGINT),
         "sigterm": (signal.SIGTERM,), "kill9": (signal.SIGKILL,)}
N_FILES = 24


def adler(data: bytes) -> str:
    return f"{zlib.adler32(data) & 0xFFFFFFFF:08x}"


def layout(kind: str, inv, tmp_path: Path, sub: str) -> tuple[str, dict[str, Path]]:
    """(source URL, {tier: destination directory on disk}) and the pool line per tier."""
    local = tmp_path / "dst-local"
    if kind == "local-src":
        src = tmp_path / "src"
        return f"file://{src}/", {
            f"t1a-xrd1/{sub}/": Path(inv.endpoints["t1a-xrd1"].data_dir) / sub,
            f"t1a-gsiftp/{sub}/": Path(inv.endpoints["t1a-gsiftp"].data_dir) / sub,
            f"file://{local}/": local}
    return f"t0-xrd/{sub}/", {
        f"t1b-xrd/{sub}/": Path(inv.endpoints["t1b-xrd"].data_dir) / sub,
        f"file://{local}/": local}


def seed_source(kind: str, inv, tmp_path: Path, sub: str, rnd: random.Random) -> dict[str, bytes]:
    root = (
        (tmp_path / "src") if kind == "local-src" else Path(inv.endpoints["t0-xrd"].data_dir) / sub
    )
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)
    data = {}
    for i in range(N_FILES):
        blob = rnd.randbytes(rnd.randrange(200_000, 2_500_000))
        (root / f"f{i:03d}.dat").write_bytes(blob)
        os.chmod(root / f"f{i:03d}.dat", 0o644)
        data[f"f{i:03d}.dat"] = blob
    return data


def listing(dirs: dict[str, Path]) -> dict[Path, set[str]]:
    out = {}
    for d in dirs.values():
        try:
            out[d] = set(os.listdir(d))
        except FileNotFoundError:
            out[d] = set()
    return out


def full_copies(dirs: dict[str, Path], data: dict[str, bytes]) -> int:
    n = 0
    for d in dirs.values():
        for name, blob in data.items():
            with contextlib.suppress(FileNotFoundError):
                n += os.stat(d / name).st_size == len(blob)
    return n


def temps(dirs: dict[str, Path]) -> set[str]:
    return {f"{d}/{n}" for d, names in listing(dirs).items() for n in names if ".gxpart-" in n}


def query(db: Path, sql: str, *args):
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def running(db: Path) -> bool:
    """Whether the journal says its scheduler runs (or has run): set inside the signal
    handlers' scope, so a stop from then on is the campaign's to handle."""
    if not db.exists():
        return False
    try:
        return query(db, "SELECT value FROM meta WHERE key = 'state'") not in ([], [("planned",)])
    except sqlite3.Error:           # created, its tables not yet committed
        return False


def one_case(inv, home: Path, tmp_path: Path, kind: str, stop: str, seed: int) -> str:
    print(f"{kind} {stop}: GXTEST_SEED={seed}")
    rnd = random.Random(seed)
    name = f"np-{kind}-{stop}-{seed}"
    sub = name
    src, dirs = layout(kind, inv, tmp_path, sub)
    data = seed_source(kind, inv, tmp_path, sub, rnd)
    tiers = "".join(f"""
  - tier: T{i}
    pool: ["{pool}"]
    max_active: 3
    min_active: 3""" for i, pool in enumerate(dirs))
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(f"""campaign: {name}
source: {{url: "{src}", files: {{glob: "*.dat"}}}}
destinations:{tiers}
checksum: {{algorithm: adler32, verify: both}}
retries: {{max: 2, backoff: 0.2s}}
timeout: 60s
""")
    env = {**os.environ, "GRIDXFER_HOME": str(home), "PYTHONFAULTHANDLER": "1"}
    db = home / "campaigns" / f"{name}.sqlite"
    proc = subprocess.Popen([*GRIDXFER, "campaign", "run", "--quiet", str(spec)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # the stop comes at a random point: once a random share of the copies has reached
        # full size at the destinations, plus a random delay. The count starts when the
        # journal says the scheduler runs: a signal sent earlier can land before the Python
        # interpreter has installed any handler, and the kernel's default action for SIGINT
        # kills any program silently (seen in CI: exit -2 and no output, 4 ms after start)
        target = rnd.randrange(0, int(0.7 * N_FILES * len(dirs)))
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline and not running(db):
            time.sleep(0.002)
        while proc.poll() is None and time.monotonic() < deadline:
            if full_copies(dirs, data) >= target:
                break
            time.sleep(0.002)
        time.sleep(rnd.uniform(0.0, 0.05))
        for i, sig in enumerate(STOPS[stop]):
            if i:
                time.sleep(rnd.uniform(0.0, 0.03))   # the second Ctrl-C: no waiting
            if proc.poll() is None:
                proc.send_signal(sig)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stopped = proc.returncode != 0
    assert proc.returncode in (0, 4, -signal.SIGKILL), f"{proc.returncode}: {out}{err}"
    assert "Traceback" not in err, err

    # every temporary name on a destination was journalled before its first byte
    journalled = {r[0] for r in query(db, "SELECT tmp_url FROM attempts WHERE tmp_url IS NOT NULL")}
    on_disk = temps(dirs)
    names = {p.rpartition("/")[2] for p in on_disk}
    assert names <= {u.rpartition("/")[2] for u in journalled}, (
        f"temporary files nobody journalled: {sorted(names)[:5]}")

    res = subprocess.run([*GRIDXFER, "campaign", "resume", name, "--quiet", "--json"], env=env,
                         capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    out = json.loads(res.stdout)
    assert (out["state"], out["files"]["done"], out["files"]["failed"]) == (
        "done", N_FILES * len(dirs), 0), out
    # removed: at least the temporary files the servers keep (an xrootd server drops an
    # unclosed POSC file itself, possibly before the resume looks)
    xrd_dirs = {str(d) for pool, d in dirs.items() if "xrd" in pool.split("/", 1)[0]}
    kept = {p for p in on_disk if p.rpartition("/")[0] not in xrd_dirs and Path(p).exists()}
    assert out["run"]["cleaned"] >= len(kept), (out["run"]["cleaned"], sorted(kept))

    # storage: exactly the campaign's files, with the source's bytes; no temporary anywhere
    for d, names in listing(dirs).items():
        assert names == set(data), (d, sorted(names ^ set(data))[:5])
        for n, blob in data.items():
            assert adler((d / n).read_bytes()) == adler(blob), (d, n)
    assert query(db, "SELECT count(*) FROM files WHERE state <> 'done'") == [(0,)]
    assert query(db, "SELECT count(*) FROM attempts WHERE status = 'active' OR "
                     "(tmp_url IS NOT NULL AND status <> 'ok')") == [(0,)]
    return (f"{kind} {stop} seed {seed}: {'stopped' if stopped else 'finished first'}, "
            f"{len(on_disk)} temp on disk, {out['run']['recovered']} recovered, "
            f"{out['run']['cleaned']} removed")


@pytest.mark.parametrize("stop", STOPS)
@pytest.mark.parametrize("kind", ["local-src", "xrd-src"])
def test_stop_at_random_point_then_resume_leaves_nothing_partial(
        local_grid, local_grid_home, tmp_path, kind, stop):
    seed = int(os.environ.get("GXTEST_SEED", "0")) or random.randrange(1 << 30)
    print(one_case(local_grid, local_grid_home, tmp_path, kind, stop, seed))


@pytest.mark.slow
@pytest.mark.parametrize("stop", STOPS)
@pytest.mark.parametrize("kind", ["local-src", "xrd-src"])
def test_stop_at_random_points_many_seeds(local_grid, local_grid_home, tmp_path, kind, stop):
    for seed in range(1, 9):
        (tmp_path / f"s{seed}").mkdir()
        print(one_case(local_grid, local_grid_home, tmp_path / f"s{seed}", kind, stop, seed))
