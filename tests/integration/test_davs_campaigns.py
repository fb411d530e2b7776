"""Campaigns with davs:// on the testbed's real XrdHttp servers (TLS, anonymous): a mixed
campaign of root, davs and gsiftp (TPC where both ends allow it, streamed otherwise), and
kill -9 during davs uploads and during HTTP-TPCs, then resume: every file correct, nothing
partial left."""
from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
import zlib
from pathlib import Path
from urllib.parse import unquote

import pytest

from gridxfer.cli.main import main
from gridxfer.movers.urls import TEMP_MARK
from gridxfer.testbed import localgrid
from gridxfer.testbed.localgrid import ServerSpec

from tests.integration.test_campaign_tokens import RIDE_OUT, RIDE_OUT_ENV

pytestmark = pytest.mark.integration
GRIDXFER = [sys.executable, "-m", "gridxfer"]


def adler32(data: bytes) -> str:
    return f"{zlib.adler32(data) & 0xFFFFFFFF:08x}"


def seed(inv, endpoint: str, sub: str, sizes: list[int]) -> dict[str, str]:
    out = {}
    for i, size in enumerate(sizes):
        data = os.urandom(size)
        localgrid.put_local(inv, endpoint, f"{sub}/f{i:03d}.dat", data)
        out[f"f{i:03d}.dat"] = adler32(data)
    return out


def files_under(root: Path) -> dict[str, Path]:
    return {p.name: p for p in root.rglob("*") if p.is_file()} if root.exists() else {}


def assert_complete(inv, home: Path, name: str, expected: dict[str, str]) -> list[sqlite3.Row]:
    """Every row done, its file at its destination with the source's adler32, and no
    temporary name anywhere under the campaign's destination directories."""
    conn = sqlite3.connect(home / "campaigns" / f"{name}.sqlite")
    conn.row_factory = sqlite3.Row
    rows = conn.execute("SELECT * FROM files").fetchall()
    conn.close()
    dirs = set()
    for r in rows:
        assert r["state"] == "done", dict(r)
        path = inv.local_path(r["dst_url"])
        assert path is not None, dict(r)
        path = Path(unquote(str(path)))     # davs names are percent-encoded in URLs
        assert adler32(path.read_bytes()) == expected[r["name"]], dict(r)
        assert r["checksum"] == expected[r["name"]]
        dirs.add(path.parent)
    for d in dirs:
        assert not [n for n in os.listdir(d) if TEMP_MARK in n], sorted(os.listdir(d))
    return rows


def test_mixed_campaign_tpc_where_both_ends_allow_it(local_grid, local_grid_home, tmp_path,
                                                      capsys, monkeypatch):
    """davs source; davs, gsiftp and root destinations, ``third_party: true``: davs -> davs
    is an HTTP-TPC, davs -> gsiftp and davs -> root are streamed through this host."""
    for key, value in RIDE_OUT_ENV.items():
        monkeypatch.setenv(key, value)
    name = "c-mixed-davs"
    expected = seed(local_grid, "t0-xrd", name, [300_000, 1_200_000, 5, 0, 70_000])
    spec = tmp_path / "c.yaml"
    spec.write_text(f"""\
campaign: {name}
source: {{url: "t0-davs/{name}/", files: {{glob: "*.dat"}}}}
destinations:
  - tier: T1A
    pool: ["t1a-davs1/{name}/"]
  - tier: T1G
    pool: ["t1a-gsiftp/{name}/"]
  - tier: T1B
    pool: ["t1b-xrd/{name}/"]
third_party: true
retries: {{max: 1, backoff: 0.2s}}
timeout: 60s
{RIDE_OUT}""")
    assert main(["campaign", "run", "--quiet", str(spec)]) == 0, capsys.readouterr()
    assert_complete(local_grid, local_grid_home, name, expected)
    conn = sqlite3.connect(local_grid_home / "campaigns" / f"{name}.sqlite")
    modes = dict(conn.execute(
        "SELECT f.tier, group_concat(DISTINCT a.mode) FROM attempts a JOIN files f "
        "ON f.id = a.file_id WHERE a.status = 'ok' GROUP BY f.tier"))
    conn.close()
    assert modes == {"T1A": "http-tpc-pull", "T1G": "davs-streamed", "T1B": "davs-streamed"}


def _wait_for_attempt(proc: subprocess.Popen, db: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if db.exists():
            try:
                with sqlite3.connect(db) as conn:
                    if conn.execute("SELECT count(*) FROM attempts").fetchone()[0]:
                        return
            except sqlite3.OperationalError:
                pass
        time.sleep(0.05)
    raise AssertionError("no attempt started")


def _wait_for_partial(where: Path, size_of: dict[str, int], timeout: float = 30) -> None:
    """Until a file of the campaign is seen half written in ``where`` under any name (its
    temporary name, or before issue 20's fix its final name), at most ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for entry in os.scandir(where) if where.exists() else ():
            name = entry.name[1:entry.name.find(TEMP_MARK)] if TEMP_MARK in entry.name \
                else entry.name
            try:
                if 0 < entry.stat().st_size < size_of.get(name, 0):
                    return
            except FileNotFoundError:
                continue
        time.sleep(0.005)


@pytest.mark.parametrize("kind", ["upload", "upload-hostile", "tpc"])
def test_kill9_during_davs_copies_then_resume(make_grid, tmp_path, kind):
    """A throttled XrdHttp (4 MB/s) keeps each copy busy for about a second: the kill
    lands mid-transfer. Uploads go from local files; TPCs are pulled from the slow
    server. After resume every file is complete and no temporary name is left.
    ``upload-hostile``: names that need percent-encoding go through a temporary name too
    (davmove.py's decoded MOVE): right after the kill, every file under its final name
    is whole (before issue 20's fix they were written in place, partial ones visible)."""
    inv = make_grid([ServerSpec("slow", "xrootd", "T0", throttle=4e6),
                     ServerSpec("dst", "xrootd", "T1")])
    home = tmp_path / "grid0"                   # make_grid's home for this grid
    rnd = random.Random()
    name = f"c-kill-davs-{kind}"
    sizes = [rnd.randrange(1_000_000, 4_000_000) for _ in range(12)]
    if kind == "tpc":
        expected = seed(inv, "slow", name, sizes)
        source = f"slow-davs/{name}/"
    else:
        src_dir = tmp_path / "src"
        src_dir.mkdir()
        expected, size_of = {}, {}
        for i, size in enumerate(sizes):
            data = os.urandom(size)
            fname = f"f {i:03d} #ü.dat" if kind == "upload-hostile" else f"f{i:03d}.dat"
            (src_dir / fname).write_bytes(data)
            expected[fname] = adler32(data)
            size_of[fname] = size
        source = f"file://{src_dir}/"
    dst = f"dst-davs/{name}/"
    spec = tmp_path / "c.yaml"
    spec.write_text(f"""\
campaign: {name}
source: {{url: "{source}", files: {{glob: "*.dat"}}}}
destinations:
  - tier: T1
    pool: ["{dst}"]
    max_active: 3
    min_active: 3
third_party: {"true" if kind == "tpc" else "false"}
retries: {{max: 2, backoff: 0.2s}}
timeout: 120s
{RIDE_OUT}""")
    env = {**os.environ, "GRIDXFER_HOME": str(home), "PYTHONFAULTHANDLER": "1", **RIDE_OUT_ENV}
    if kind != "tpc":           # the slow server is the destination of uploads
        spec.write_text(spec.read_text().replace(dst, f"slow-davs/{name}/"))
    proc = subprocess.Popen([*GRIDXFER, "campaign", "run", "--quiet", str(spec)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    db = home / "campaigns" / f"{name}.sqlite"
    _wait_for_attempt(proc, db)
    if kind == "upload-hostile":        # the kill lands while a file is half written
        _wait_for_partial(Path(inv.endpoints["slow"].data_dir) / name, size_of)
    else:
        time.sleep(rnd.uniform(0.5, 1.5))
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    with sqlite3.connect(db) as conn:
        left = conn.execute("SELECT count(*) FROM files WHERE state != 'done'").fetchone()[0]
        active = conn.execute("SELECT count(*) FROM attempts WHERE status = 'active'").fetchone()[0]
    assert left > 0 and active > 0          # killed with copies in flight
    if kind == "upload-hostile":            # issue 20: no partial file under a final name
        where = Path(inv.endpoints["slow"].data_dir) / name
        final = {n: where / n for n in expected if (where / n).exists()}
        assert {n: adler32(p.read_bytes()) for n, p in final.items()} == \
            {n: expected[n] for n in final}
    res = subprocess.run([*GRIDXFER, "campaign", "resume", name, "--quiet"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, f"exit {res.returncode}: {res.stdout}{res.stderr}"
    rows = assert_complete(inv, home, name, expected)
    assert all(r["dst_url"].startswith("davs://") for r in rows)


@pytest.mark.slow
def test_a_stalled_tpc_is_retried_and_the_campaign_completes(make_grid, tmp_path):
    """xrootd#1303: the TPC's source stops (SIGSTOP) for longer than the stall timeout;
    the attempt is cancelled as a stall (timeout), retried once the source is back, and the
    file arrives whole. The stop outlasts the timeout plus a marker interval, so the stall
    fires whatever the moment the stop lands."""
    inv = make_grid([ServerSpec("slow", "xrootd", "T0", throttle=4e6),
                     ServerSpec("dst", "xrootd", "T1")])
    home = tmp_path / "grid0"
    name = "c-stall-davs"
    expected = seed(inv, "slow", name, [40 << 20])
    spec = tmp_path / "c.yaml"
    spec.write_text(f"""\
campaign: {name}
source: {{url: "slow-davs/{name}/", files: {{glob: "*.dat"}}}}
destinations:
  - tier: T1
    pool: ["dst-davs/{name}/"]
third_party: true
retries: {{max: 3, backoff: 0.2s}}
timeout: 300s
circuit_breaker: {{cooldown: 2s, max_cooldown: 4s}}
on_pool_down: {{wait: 180s}}
""")
    # the stall opens the one endpoint's circuit (a pool that is down): its files wait
    env = {**os.environ, "GRIDXFER_HOME": str(home), "GRIDXFER_HTTP_STALL_TIMEOUT": "8"}
    proc = subprocess.Popen([*GRIDXFER, "campaign", "run", "--quiet", str(spec)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_for_attempt(proc, home / "campaigns" / f"{name}.sqlite")
    server = inv.endpoints["slow"].pid
    time.sleep(2)
    os.kill(server, signal.SIGSTOP)
    try:
        time.sleep(20)
    finally:
        os.kill(server, signal.SIGCONT)
    out, err = proc.communicate(timeout=240)
    with sqlite3.connect(home / "campaigns" / f"{name}.sqlite") as conn:
        tries = conn.execute("SELECT status, error_class, error_msg, started, ended "
                             "FROM attempts ORDER BY id").fetchall()
    assert proc.returncode == 0, (out + err, tries)
    assert_complete(inv, home, name, expected)
    assert tries[-1][0] == "ok" and len(tries) >= 2, tries
    assert tries[0][1] == "timeout" and "stalled" in tries[0][2], tries
