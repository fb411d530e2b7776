"""Campaigns end to end on the embedded local grid (real XRootD, GSI GridFTP, anonymous
GridFTP servers; real movers): root://, gsiftp://, ftp://, TPC, kill -9 + resume,
per-file failures with exit 3."""
from __future__ import annotations

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

from gridxfer.cli.main import main

pytestmark = pytest.mark.integration

GRIDXFER = [sys.executable, "-m", "gridxfer"]


def adler32(path: Path) -> str:
    return f"{zlib.adler32(Path(path).read_bytes()) & 0xFFFFFFFF:08x}"


def seed(inv, endpoint: str, sub: str, sizes: list[int]) -> dict[str, str]:
    """Random files under <endpoint data dir>/<sub>/; returns name -> adler32."""
    root = Path(inv.endpoints[endpoint].data_dir) / sub
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)
    out = {}
    for i, size in enumerate(sizes):
        path = root / f"f{i:03d}.dat"
        path.write_bytes(os.urandom(size))
        os.chmod(path, 0o644)
        out[path.name] = adler32(path)
    return out


def write_spec(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def on_disk(inv, endpoint: str, sub: str) -> dict[str, Path]:
    root = Path(inv.endpoints[endpoint].data_dir) / sub
    return {p.relative_to(root).as_posix(): p for p in root.rglob("*") if p.is_file()} \
        if root.exists() else {}


def journal_rows(home: Path, name: str) -> list[sqlite3.Row]:
    conn = sqlite3.connect(home / "campaigns" / f"{name}.sqlite")
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute("SELECT * FROM files ORDER BY id").fetchall()
    finally:
        conn.close()


def assert_storage_agrees(inv, home: Path, name: str, expected: dict[str, str]) -> None:
    """Every journalled file is done, present with the right adler32 at its dst_url, and no
    other (temporary or partial) file is visible in the destination directories."""
    rows = journal_rows(home, name)
    assert rows and {r["state"] for r in rows} == {"done"}, [dict(r) for r in rows
                                                             if r["state"] != "done"]
    dirs: dict[Path, set[str]] = {}
    for r in rows:
        path = inv.local_path(r["dst_url"])
        assert path is not None and path.is_file(), r["dst_url"]
        assert adler32(path) == expected[r["name"]] == r["checksum"], r["dst_url"]
        dirs.setdefault(path.parent, set()).add(path.name)
    for d, names in dirs.items():
        assert {p.name for p in d.iterdir()} == names, f"stray files in {d}"


def wait_for_first_attempt(proc: subprocess.Popen, db: Path, timeout: float = 60.0) -> None:
    """Until the campaign run by ``proc`` has journalled an attempt (the first transfers
    started), it exits, or ``timeout`` passes."""
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if db.exists():
            try:
                with sqlite3.connect(db, timeout=5) as conn:
                    if conn.execute("SELECT count(*) FROM attempts").fetchone()[0]:
                        return
            except sqlite3.Error:
                pass
        time.sleep(0.05)


def xrd_checksum(inv, endpoint: str, url: str) -> str:
    ep = inv.endpoints[endpoint]
    path = "/" + url.split("//", 2)[2]
    out = subprocess.run(["xrdfs", f"root://127.0.0.1:{ep.port}", "query", "checksum", path],
                         capture_output=True, text=True, timeout=30, env=os.environ)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()[1]


def test_root_gsiftp_ftp_campaign(local_grid, local_grid_home, tmp_path, capsys):
    expected = seed(local_grid, "t0-xrd", "c-proto", [0, 1, 65_536, 1_000_003, 2_500_000])
    spec = write_spec(tmp_path, """\
campaign: c-proto
source: {url: "t0-xrd/c-proto/", files: {glob: "*.dat"}}
destinations:
  - tier: T1A
    pool: ["t1a-xrd1/c-proto/", "t1a-gsiftp/c-proto/"]
    streams: 2
    max_active: 3
  - tier: T1B
    pool: ["t1b-ftp/c-proto/"]
    max_active: 2
retries: {max: 1, backoff: 0.2s}
timeout: 60s
""")
    assert main(["campaign", "run", "--quiet", "--json", "--selector", "round-robin",
                 str(spec)]) == 0, capsys.readouterr().err
    res = json.loads(capsys.readouterr().out)
    assert (res["files"]["done"], res["files"]["failed"]) == (10, 0)
    assert_storage_agrees(local_grid, local_grid_home, "c-proto", expected)
    rows = journal_rows(local_grid_home, "c-proto")
    schemes = {r["dst_url"].split(":", 1)[0] for r in rows}
    assert schemes == {"root", "gsiftp", "ftp"}
    for r in rows:      # XRootD's own checksum query agrees with the journal
        if r["dst_url"].startswith("root://"):
            assert xrd_checksum(local_grid, "t1a-xrd1", r["dst_url"]) == r["checksum"]


@pytest.mark.parametrize("src,dst", [("t0-gsiftp", "t1a-gsiftp"), ("t0-xrd", "t1a-xrd2")])
def test_third_party_campaign(local_grid, local_grid_home, tmp_path, capsys, src, dst):
    name = f"c-tpc-{src}"
    expected = seed(local_grid, src, name, [100_000, 1_500_000, 3])
    spec = write_spec(tmp_path, f"""\
campaign: {name}
source: {{url: "{src}/{name}/", files: {{glob: "*.dat"}}}}
destinations:
  - tier: T1A
    pool: ["{dst}/{name}/"]
    streams: 2
    max_active: 2
third_party: true
retries: {{max: 1, backoff: 0.2s}}
""")
    assert main(["campaign", "run", "--quiet", str(spec)]) == 0, capsys.readouterr().err
    assert_storage_agrees(local_grid, local_grid_home, name, expected)
    conn = sqlite3.connect(local_grid_home / "campaigns" / f"{name}.sqlite")
    modes = {m for (m,) in conn.execute("SELECT mode FROM attempts WHERE status = 'ok'")}
    conn.close()
    assert all("tpc" in (m or "").lower() or "third" in (m or "").lower() for m in modes), modes


def test_partial_failures_exit_3(local_grid, local_grid_home, tmp_path, capsys):
    expected = seed(local_grid, "t0-xrd", "c-fail", [200_000, 300_000])
    spec = write_spec(tmp_path, """\
campaign: c-fail
source:
  url: "t0-xrd/c-fail/"
  files:
    - f000.dat
    - {name: f001.dat, adler32: "12345678"}
    - {name: missing.dat, size: 10}
destinations:
  - tier: T1A
    pool: ["t1a-xrd1/c-fail/"]
  - tier: DEAD
    pool: ["root://127.0.0.1:9//data/c-fail/"]
retries: {max: 0, backoff: 0.1s}
timeout: 30s
""")
    assert main(["campaign", "run", "--quiet", str(spec)]) == 3
    out = capsys.readouterr().out
    rows = {(r["tier"], r["name"]): r for r in journal_rows(local_grid_home, "c-fail")}
    ok = rows[("T1A", "f000.dat")]
    assert (
        ok["state"] == "done"
        and adler32(local_grid.local_path(ok["dst_url"])) == expected["f000.dat"]
    )
    assert (rows[("T1A", "f001.dat")]["state"], rows[("T1A", "f001.dat")]["error_class"]) == (
        "failed", "checksum")
    assert (rows[("T1A", "missing.dat")]["state"],
            rows[("T1A", "missing.dat")]["error_class"]) == ("failed", "source_missing")
    for name in ("f000.dat", "f001.dat"):
        assert rows[("DEAD", name)]["state"] == "failed"
        assert rows[("DEAD", name)]["error_class"] in ("connection", "timeout")
    # the bad copy was removed; nothing but the good file is visible at the destination
    assert set(on_disk(local_grid, "t1a-xrd1", "c-fail")) == {"f000.dat"}
    for line in ("FAILED T1A f001.dat: checksum", "FAILED T1A missing.dat: source_missing",
                 "FAILED DEAD f000.dat"):
        assert line in out


def test_kill9_then_resume(local_grid, local_grid_home, tmp_path):
    rnd = random.Random()
    expected = seed(local_grid, "t0-xrd", "c-kill", [rnd.randrange(500_000, 4_000_000)
                                                     for _ in range(48)])
    spec = write_spec(tmp_path, """\
campaign: c-kill
source: {url: "t0-xrd/c-kill/", files: {glob: "*.dat"}}
destinations:
  - tier: T1A
    pool: ["t1a-xrd1/c-kill/", "t1a-gsiftp/c-kill/"]
    streams: 2
    max_active: 4
    min_active: 4
  - tier: T1B
    pool: ["t1b-ftp/c-kill/"]
    max_active: 2
retries: {max: 2, backoff: 0.2s}
timeout: 60s
""")
    # faulthandler: a crash of the resuming process (not the kill) shows where it happened
    env = {**os.environ, "GRIDXFER_HOME": str(local_grid_home), "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.Popen([*GRIDXFER, "campaign", "run", "--quiet", str(spec)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    db = local_grid_home / "campaigns" / "c-kill.sqlite"
    wait_for_first_attempt(proc, db)
    time.sleep(rnd.uniform(0.05, 0.5))     # the whole campaign takes ~1-2 s here
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    with sqlite3.connect(db) as conn:       # killed mid-campaign, not after it
        left = conn.execute("SELECT count(*) FROM files WHERE state != 'done'").fetchone()[0]
        active = conn.execute("SELECT count(*) FROM attempts WHERE status = 'active'").fetchone()[0]
    assert left > 0
    res = subprocess.run([*GRIDXFER, "campaign", "resume", "c-kill", "--quiet"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f"exit {res.returncode}: {res.stdout}{res.stderr}"
    assert_storage_agrees(local_grid, local_grid_home, "c-kill", expected)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM attempts WHERE status = 'active'"
                            ).fetchone()[0] == 0
        recovered = conn.execute("SELECT count(*) FROM events WHERE kind = 'recovered'"
                                 ).fetchone()[0]
    assert recovered >= active
    if active:
        assert "recovered after a crash" in res.stdout


@pytest.mark.parametrize("endpoint", ["t0-xrd", "t0-gsiftp"])
def test_recursive_listing_through_the_mover(local_grid, endpoint):
    from gridxfer.campaign.spec.dataset import expand
    from gridxfer.campaign.spec.schema import SourceSpec

    root = Path(local_grid.endpoints[endpoint].data_dir) / "c-list"
    (root / "a" / "b").mkdir(parents=True, exist_ok=True)
    for rel, size in (("x.dat", 5), ("a/y.dat", 70_000), ("a/b/z.dat", 0), ("a/skip.txt", 1)):
        (root / rel).write_bytes(os.urandom(size))
    for d in (root, root / "a", root / "a" / "b"):
        os.chmod(d, 0o755)
    (root / "a" / ".y.dat.gxpart-0123abcd").write_bytes(b"partial")   # a mover's temp file
    base = local_grid.resolve(f"{endpoint}/c-list/")
    got = [(e.name, e.size, e.src_url) for e in expand(SourceSpec(url=base, glob="*.dat",
                                                                  recursive=True))]
    assert sorted(got) == [("a/b/z.dat", 0, base + "a/b/z.dat"),
                           ("a/y.dat", 70_000, base + "a/y.dat"), ("x.dat", 5, base + "x.dat")]
    flat = [e.name for e in expand(SourceSpec(url=base, glob="*.dat"))]
    assert flat == ["x.dat"]


def test_sigterm_stops_cleanly_with_exit_4(local_grid, local_grid_home, tmp_path):
    expected = seed(local_grid, "t0-xrd", "c-term", [4_000_000] * 16)
    spec = write_spec(tmp_path, """\
campaign: c-term
source: {url: "t0-xrd/c-term/", files: {glob: "*.dat"}}
destinations:
  - tier: T1A
    pool: ["t1a-xrd1/c-term/", "t1a-gsiftp/c-term/"]
    max_active: 4
    min_active: 4
""")
    env = {**os.environ, "GRIDXFER_HOME": str(local_grid_home)}
    proc = subprocess.Popen([*GRIDXFER, "campaign", "run", "--quiet", str(spec)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    db = local_grid_home / "campaigns" / "c-term.sqlite"
    wait_for_first_attempt(proc, db)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 4, out + err
    assert "gridxfer campaign resume c-term" in err and "Traceback" not in err
    with sqlite3.connect(db) as conn:
        assert (
            conn.execute("SELECT count(*) FROM attempts WHERE status = 'active'").fetchone()[0] == 0
        )
        assert conn.execute("SELECT count(*) FROM files WHERE state = 'active'").fetchone()[0] == 0
        assert (
            conn.execute("SELECT value FROM meta WHERE key = 'state'").fetchone()[0]
            == "interrupted"
        )
    for ep in ("t1a-xrd1", "t1a-gsiftp"):      # no temporary file left behind
        assert not [n for n in on_disk(local_grid, ep, "c-term") if ".gxpart-" in n]
    res = subprocess.run([*GRIDXFER, "campaign", "resume", "c-term", "--quiet"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert_storage_agrees(local_grid, local_grid_home, "c-term", expected)
