"""Campaigns that finish on tape, on a real tape-backed xrootd (testbed/tapexrd.py: XRootD's
prepare plugin answering ``query prepare`` over the EMULATED drives), through the real
root:// TapeOps (movers/xrootd/tape.py). Small files, fast drives: each test in seconds.

- a campaign to a tape-backed tier completes only after migration (the drives migrate a
  file once unmodified for MIN_AGE: the journal's on_tape comes after that);
- a tier whose files never migrate fails them with ``archive_timeout``, and the storage
  indeed still has them on disk only;
- a tape source (migrated and purged: offline) is staged in bulk, then copied, then
  released (evicted from disk again, as FTS3 releases after the transfer);
- kill -9 while files are archiving, then resume: every file on tape, verified, none
  copied twice.
"""
from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "monitoring"))
from monfixtures import run_check  # noqa: E402

from gridxfer.campaign import runner  # noqa: E402
from gridxfer.movers import capabilities_of, mover_for  # noqa: E402
from gridxfer.movers.tape import Residency  # noqa: E402
from gridxfer.testbed.gridspec import ServerSpec  # noqa: E402
from gridxfer.testbed.tapexrd import TapeSpec  # noqa: E402

pytestmark = pytest.mark.integration

KiB = 1024
MIN_AGE = 3.0
NAME = "t1-tape"


def drives(min_age: float, purge: bool = False) -> TapeSpec:
    return TapeSpec(drives=2, rate=100e6, mount=0.1, position=0.01, min_age=min_age,
                    purge=purge, max_session=2.0)


def adler(data: bytes) -> str:
    return f"{zlib.adler32(data) & 0xFFFFFFFF:08x}"


def sources(tmp_path: Path, n: int = 6, size: int = 256 * KiB) -> dict[str, bytes]:
    src = tmp_path / "src"
    src.mkdir()
    out = {}
    for i in range(n):
        data = os.urandom(size + i)
        (src / f"f{i}.dat").write_bytes(data)
        out[f"f{i}.dat"] = data
    return out


def campaign(tmp_path: Path, name: str, source_url: str, pool: str, *, files: str,
             archive: str = "", staging: str = "") -> Path:
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(f"""\
campaign: {name}
source:
  url: "{source_url}"
  files: {files}
{staging}destinations:
  - tier: T1
    pool: ["{pool}"]
    max_active: 3
{archive}retries: {{max: 1, backoff: 0.2s}}
timeout: 60s
""")
    return spec


def planned_rows(home: Path, name: str) -> list[sqlite3.Row]:
    """The journal's files once the runner has created them; [] before (the file exists a
    moment before its tables: CI once read it in between, 'no such table: files')."""
    if not (home / "campaigns" / f"{name}.sqlite").exists():
        return []
    try:
        return rows(home, name)
    except sqlite3.OperationalError:
        return []


def rows(home: Path, name: str) -> list[sqlite3.Row]:
    conn = sqlite3.connect(f"file:{home}/campaigns/{name}.sqlite?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute("SELECT * FROM files ORDER BY name").fetchall()
    finally:
        conn.close()


def residency(urls: list[str]) -> dict[str, Residency]:
    tape = capabilities_of(mover_for(urls[0])).tape
    assert tape is not None
    return {u: s.residency for u, s in tape.archive_status(urls).items()}


def perf(out: str) -> dict[str, float]:
    return {m[0].strip("'"): float(m[1]) for m in re.findall(r"(\S+)=([-\d.]+)",
                                                                out.split("|")[1])}


def cta_sessions(ep) -> str:
    return Path(ep.tape_log).read_text() if Path(ep.tape_log).exists() else ""


def test_a_campaign_to_a_tape_tier_completes_only_after_migration(make_grid, gridxfer_home,
                                                                  tmp_path):
    inv = make_grid([ServerSpec(NAME, "xrootd", "T1", tape=drives(MIN_AGE))])
    ep = inv.endpoints[NAME]
    data = sources(tmp_path)
    base = ep.url + "camp/"
    spec = campaign(tmp_path, "totape", f"file://{tmp_path}/src/", base, files='{glob: "*.dat"}',
                    archive="    archive: {timeout: 60s}\n")
    res = runner.run_campaign(spec)
    assert (res.state, res.files_done, res.files_failed) == ("done", len(data), 0)
    got = rows(gridxfer_home, "totape")
    for r in got:
        assert r["state"] == "done" and r["checksum"] == adler(data[r["name"]])
        # the drives take a file once unmodified for MIN_AGE: the journal's on_tape (when
        # the storage first said so) cannot come sooner than that after the file's last
        # write (both clocks are this host's; 0.05 s for the filesystem's timestamps)
        mtime = inv.local_path(base + r["name"]).stat().st_mtime
        assert r["on_tape"] >= mtime + MIN_AGE - 0.05, (dict(r), mtime)
        assert r["on_tape"] > r["copied"]
    urls = [base + n for n in data]
    assert set(residency(urls).values()) == {Residency.ON_TAPE}
    # the buffer check reads the same truth from the campaign's journal (what reached tape)
    # as from the drives' CTA log: the same tape outflow, and the campaign's inflow. A drive
    # logs its session after the unmount (1 s) that follows its last file, so the files are
    # on tape before their session's line (a fresh-clone run read the log in between): poll
    # the log's side with a deadline
    common = ["-p", ep.data_dir, "--inflow-campaign", "totape", "--tier", "T1", "-W", "15m"]
    by_journal = perf(run_check("buffer", *common, "--outflow-campaign", "totape").stdout)
    deadline = time.monotonic() + 30
    while True:
        by_log = perf(run_check("buffer", *common, "--cta", ep.tape_log, "--min-volume",
                                "0").stdout)
        if by_log.get("outflow_MBps") == pytest.approx(by_journal["outflow_MBps"], abs=1e-3) \
                or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert 'mountType="ArchiveForUser"' in cta_sessions(ep)
    total = sum(len(d) for d in data.values())
    assert by_journal["outflow_MBps"] == pytest.approx(total / 900 / 1e6, rel=0.01, abs=1e-3)
    assert by_journal["outflow_MBps"] == pytest.approx(by_log["outflow_MBps"], abs=1e-3)
    assert by_journal["inflow_MBps"] == pytest.approx(total / 900 / 1e6, rel=0.01, abs=1e-3)


def test_files_not_migrated_in_time_fail_archive_timeout(make_grid, gridxfer_home, tmp_path):
    inv = make_grid([ServerSpec(NAME, "xrootd", "T1", tape=drives(3600.0))])   # never, here
    ep = inv.endpoints[NAME]
    data = sources(tmp_path, n=3)
    base = ep.url + "late/"
    spec = campaign(tmp_path, "late", f"file://{tmp_path}/src/", base, files='{glob: "*.dat"}',
                    archive="    archive: {timeout: 3s}\n")
    res = runner.run_campaign(spec)
    assert (res.state, res.files_done, res.files_failed) == ("partial", 0, 3)
    got = rows(gridxfer_home, "late")
    assert {(r["state"], r["error_class"]) for r in got} == {("failed", "archive_timeout")}
    assert all(r["on_tape"] is None for r in got)
    # the storage agrees: copied, verified, still on disk only
    assert set(residency([base + n for n in data]).values()) == {Residency.DISK_ONLY}


def test_a_tape_source_is_staged_then_copied(make_grid, gridxfer_home, tmp_path):
    inv = make_grid([ServerSpec(NAME, "xrootd", "T1", tape=drives(0.5, purge=True))])
    ep = inv.endpoints[NAME]
    data = {f"s{i}.dat": os.urandom(128 * KiB + i) for i in range(5)}
    store = Path(ep.data_dir) / "raw"
    store.mkdir(parents=True)
    for n, d in data.items():
        (store / n).write_bytes(d)
    if os.geteuid() == 0:
        from gridxfer.testbed.xrootd import chown_tree
        chown_tree(Path(ep.data_dir), inv.extra["service_user"])
    urls = [ep.url + "raw/" + n for n in data]
    deadline = time.monotonic() + 30
    while set(residency(urls).values()) != {Residency.TAPE_ONLY}:     # migrated and purged
        assert time.monotonic() < deadline, residency(urls)
        time.sleep(0.2)
    listed = "[" + ", ".join(f"{{name: {n}, size: {len(d)}}}" for n, d in data.items()) + "]"
    dst = tmp_path / "dst"
    dst.mkdir()
    spec = campaign(tmp_path, "staged", ep.url + "raw/", f"file://{dst}/", files=listed,
                    staging="  bring_online: {timeout: 60s, pin_lifetime: 10m}\n")
    res = runner.run_campaign(spec)
    assert (res.state, res.files_done, res.files_failed) == ("done", len(data), 0)
    for n, d in data.items():
        assert (dst / n).read_bytes() == d
    conn = sqlite3.connect(f"file:{gridxfer_home}/campaigns/staged.sqlite?mode=ro", uri=True)
    late = conn.execute("SELECT count(*) FROM attempts a JOIN files f ON f.id = a.file_id "
                        "WHERE a.started < f.staged OR f.staged IS NULL").fetchone()[0]
    assert late == 0                                   # every copy began once online
    assert conn.execute("SELECT count(*) FROM attempts").fetchone()[0] == len(data)
    deadline = time.monotonic() + 15                   # copied: released (prepare -e), offline
    while set(residency(urls).values()) != {Residency.TAPE_ONLY}:
        assert time.monotonic() < deadline, residency(urls)
        time.sleep(0.2)
    deadline = time.monotonic() + 15                   # the recall session's line, at its end
    while "mountType=\"Retrieve\"" not in cta_sessions(ep):
        assert time.monotonic() < deadline, cta_sessions(ep)
        time.sleep(0.2)


@pytest.mark.parametrize("sig, code", [(signal.SIGKILL, -signal.SIGKILL), (signal.SIGINT, 4)],
                         ids=["kill-9", "ctrl-c"])
def test_kill9_while_archiving_then_resume_ends_all_on_tape_and_verified(make_grid,
                                                                         gridxfer_home,
                                                                         tmp_path, sig, code):
    inv = make_grid([ServerSpec(NAME, "xrootd", "T1", tape=drives(3600.0))])   # held on disk
    ep = inv.endpoints[NAME]
    data = sources(tmp_path, n=5)
    base = ep.url + "k9/"
    spec = campaign(tmp_path, "k9", f"file://{tmp_path}/src/", base, files='{glob: "*.dat"}',
                    archive="    archive: {timeout: 10m}\n")
    env = dict(os.environ, GRIDXFER_HOME=str(gridxfer_home))
    proc = subprocess.Popen([sys.executable, "-m", "gridxfer", "campaign", "run", "--quiet",
                             str(spec)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "files never reached archiving"
            if [r["state"] for r in planned_rows(gridxfer_home, "k9")].count(
                    "archiving") == len(data):
                break
            time.sleep(0.05)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, (out, err)         # Ctrl-C: interrupted, resumable (4)
    assert {r["state"] for r in rows(gridxfer_home, "k9")} == {"archiving"}
    urls = [base + n for n in data]
    assert set(residency(urls).values()) == {Residency.DISK_ONLY}
    for u in urls:                      # the drives may take them now
        path = inv.local_path(u)
        os.utime(path, (time.time() - 7200, time.time() - 7200))
    res = runner.resume_campaign("k9")
    assert (res.state, res.files_done, res.files_failed) == ("done", len(data), 0)
    got = rows(gridxfer_home, "k9")
    assert all(r["state"] == "done" and r["on_tape"] for r in got)
    assert all(r["attempts"] == 1 for r in got)        # nothing copied twice
    assert set(residency(urls).values()) == {Residency.ON_TAPE}
    for n, d in data.items():
        assert inv.local_path(base + n).read_bytes() == d
        assert next(r for r in got if r["name"] == n)["checksum"] == adler(d)


def test_tape_falling_behind_alerts_through_the_passive_path_then_ends_ok(make_grid,
                                                                          gridxfer_home,
                                                                          tmp_path):
    inv = make_grid([ServerSpec(NAME, "xrootd", "T1", tape=drives(3600.0))])   # tape stalls
    ep = inv.endpoints[NAME]
    sources(tmp_path, n=3)
    spec = campaign(tmp_path, "behind", f"file://{tmp_path}/src/", ep.url + "behind/",
                    files='{glob: "*.dat"}', archive="    archive: {timeout: 6s}\n")
    cmd = tmp_path / "nagios.cmd"
    env = dict(os.environ, GRIDXFER_HOME=str(gridxfer_home))
    res = subprocess.run([sys.executable, "-m", "gridxfer", "campaign", "run", "--quiet",
                          str(spec), "--alert-cmd-file", str(cmd), "--alert-host", "t1-buffer",
                          "--alert-tape-backlog", "2", "--alert-tape-wait", "3s",
                          "--alert-window", "1s"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 3, res.stdout + res.stderr       # files failed (archive_timeout)
    lines = cmd.read_text().splitlines()
    tape = [ln for ln in lines if ";t1-buffer;gridxfer_tape;" in ln]
    codes = [int(ln.split(";")[3]) for ln in tape]
    # the backlog bound (WARNING) and then the wait bound (CRITICAL); on a slow machine
    # both may be over before the first result: then CRITICAL names both
    assert codes[0] in (1, 2) and "3 files waiting for tape (> 2)" in tape[0], tape
    assert 2 in codes and "(> 3.0s)" in tape[codes.index(2)], tape
    assert codes[-1] == 0 and "campaign ended" in tape[-1], tape
    assert "archive_backlog=" in tape[0] and "tape_wait_s=" in tape[0]


def test_archive_on_a_disk_only_xrootd_is_refused_in_one_line_before_any_copy(make_grid,
                                                                              gridxfer_home,
                                                                              tmp_path):
    inv = make_grid([ServerSpec("plain", "xrootd", "T1")])             # no prepare plugin
    ep = inv.endpoints["plain"]
    sources(tmp_path, n=2)
    spec = campaign(tmp_path, "notape", f"file://{tmp_path}/src/", ep.url + "nt/",
                    files='{glob: "*.dat"}', archive="    archive: {timeout: 1h}\n")
    env = dict(os.environ, GRIDXFER_HOME=str(gridxfer_home))
    res = subprocess.run([sys.executable, "-m", "gridxfer", "campaign", "run", "--quiet",
                          str(spec)], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not answer tape queries" in lines[0], res.stderr
    assert "Traceback" not in res.stderr
    assert not (Path(ep.data_dir) / "nt").exists() or not any((Path(ep.data_dir) / "nt").iterdir())
