"""kill -9 + resume through the fast paths: file -> root:// POSC uploads to the FINAL name,
one journal commit per scheduler loop (finished attempts linger up to RESULTS_LINGER before
they are committed), short transfers dispatched ahead to the link gate, long transfers
leaving the gate at data_done while their checksum runs.

A real `gridxfer campaign run` (subprocess) to one loopback xrootd is SIGKILLed while files
are being done, then `gridxfer campaign resume` finishes it. Checked:

* at the kill: every file the server shows complete (not POSC-pending) already has the
  source's bytes (POSC: no half file ever under the final name), and every file the
  journal calls done is there;
* recovery settles exactly the attempts left 'active': a 'recovered' event each, outcome
  'done' for a complete non-pending destination, 'redo' for a missing or pending one;
* after the resume: campaign done, every file done in the journal (with the source adler32
  when checksums are on), each destination present exactly once with the source's bytes,
  not POSC-pending, and nothing else (no '.gxpart-' temporary) in the directory.

Showing the tests can fail: ``GXTEST_BREAK=<mode>`` runs the CLI through a wrapper that
breaks one thing (modes in ``BREAKS``); every mode must make these tests fail.
"""
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
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from gridxfer.errors import TransferError
from gridxfer.movers.xrootd.mover import XRootDMover
from gridxfer.testbed import localgrid
from gridxfer.testbed.procs import alive

pytestmark = pytest.mark.integration

MiB = 1 << 20
ENDPOINT = "crash-xrd"

# Recovery answers ``verdict`` for a POSC-pending destination, without touching it.
_PENDING_VERDICT = """
from gridxfer.campaign.engine import recovery as _r
_orig = _r._check_destination
def _check(mover, src_ops, r, spec, *rest):
    try:
        if mover.stat(r["dst_url"]).pending:
            return "{verdict}", None
    except Exception:
        pass
    return _orig(mover, src_ops, r, spec, *rest)
_r._check_destination = _check
"""

# Deliberate breakage, applied inside the CLI subprocesses (never used by a normal run):
BREAKS = {
    # recovery keeps a POSC-pending destination as done (as if it were complete)
    "keep-pending": _PENDING_VERDICT.format(verdict="done"),
    # recovery redoes a POSC-pending destination without deleting it
    "leave-pending": _PENDING_VERDICT.format(verdict="redo"),
    # the end of a run does not commit the results gathered since the last loop
    "no-close-flush": """
from gridxfer.campaign.engine import ledger as _l, scheduler as _s
def _close(self, state, kind, now, **detail):
    _l.record_end(self.conn, state, kind, now, **detail)
_s.Scheduler._close = _close
""",
    # recovery is skipped: attempts left 'active' stay so
    "no-recovery": """
from gridxfer.campaign.engine import recovery as _rec
from gridxfer.campaign import runner as _run
_run.sweep = lambda *a, **k: _rec.Swept(0, 0)
""",
    # recovery redoes everything: complete files (finished but not committed) are deleted
    "redo-all": """
from gridxfer.campaign.engine import recovery as _r
def _check(mover, src_ops, r, spec, *rest):
    try:
        mover.unlink(r["dst_url"])
    except Exception:
        pass
    return "redo", None
_r._check_destination = _check
""",
}
BREAK = os.environ.get("GXTEST_BREAK", "")
assert not BREAK or BREAK in BREAKS, f"GXTEST_BREAK must be one of {sorted(BREAKS)}"


# Every link counts as far (engine/slots.py): a short transfer leaves its slot at data_done,
# the native relay's once its read-back matched, its close still in flight (the WAN path).
FAR_SLOTS = """
from gridxfer.campaign.engine import slots as _slots
_slots.QUICK = 0.0
"""


def gridxfer_cmd(env: dict | None = None) -> list[str]:
    far = FAR_SLOTS if (env or {}).get("GXTEST_FAR_SLOTS") else ""
    if not BREAK and not far:
        return [sys.executable, "-m", "gridxfer"]
    wrapper = far + BREAKS.get(BREAK, "") + "\nfrom gridxfer.cli.main import main\nmain()\n"
    return [sys.executable, "-c", wrapper]


def adler(data: bytes) -> str:
    return f"{zlib.adler32(data) & 0xFFFFFFFF:08x}"


@dataclass(frozen=True)
class Case:
    name: str
    base: str                   # destination directory URL (ends in /)
    ddir: Path                  # that directory on the server's disk
    db: Path                    # the campaign journal
    source: dict[str, bytes]    # file name -> content


@pytest.fixture
def xrd(make_grid):
    return make_grid([localgrid.ServerSpec(ENDPOINT, "xrootd", "T1")])


@pytest.fixture
def xrd2(make_grid):
    """The destination server and a source server (root -> root)."""
    return make_grid([localgrid.ServerSpec(ENDPOINT, "xrootd", "T1"),
                      localgrid.ServerSpec("crash-src", "xrootd", "T0")])


def make_case(inv, home: Path, tmp_path: Path, name: str, sizes: list[int], *,
              checksum: str, max_active: int | None,
              src_endpoint: str | None = None) -> tuple[Case, Path]:
    """``src_endpoint``: the source files on that xrootd (root -> root), else local files;
    ``max_active`` None: no max_active, the tier's default ceiling and its optimizer."""
    src = tmp_path / "src"
    src.mkdir()
    source = {}
    for i, size in enumerate(sizes):
        data = os.urandom(size)
        if src_endpoint:
            localgrid.put_local(inv, src_endpoint, f"{name}-src/f{i:04d}.dat", data)
        else:
            (src / f"f{i:04d}.dat").write_bytes(data)
        source[f"f{i:04d}.dat"] = data
    src_url = inv.endpoints[src_endpoint].url + f"{name}-src/" if src_endpoint \
        else f"file://{src}/"
    base = inv.endpoints[ENDPOINT].url + f"{name}/"
    spec = tmp_path / f"{name}.yaml"
    pin = f"    max_active: {max_active}\n    min_active: {max_active}\n" if max_active else ""
    spec.write_text(f"""\
campaign: {name}
source: {{url: "{src_url}", files: {{glob: "*.dat"}}}}
destinations:
  - tier: T1
    pool: ["{base}"]
{pin}checksum: {checksum}
retries: {{max: 2, backoff: 0.2s}}
timeout: 120s
""")
    ddir = Path(inv.endpoints[ENDPOINT].data_dir) / name
    return Case(name, base, ddir, home / "campaigns" / f"{name}.sqlite", source), spec


def query(db: Path, sql: str, *args) -> list[tuple]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def disk_sizes(case: Case) -> dict[str, int]:
    try:
        with os.scandir(case.ddir) as it:
            return {e.name: e.stat().st_size for e in it}
    except FileNotFoundError:
        return {}


def server_view(case: Case, names) -> dict[str, tuple[int, bool] | None]:
    """name -> (size, POSC-pending) as the xrootd server reports it, None if absent."""
    mover, out = XRootDMover(), {}
    for n in names:
        try:
            e = mover.stat(case.base + n)
            out[n] = (e.size, e.pending)
        except TransferError:
            out[n] = None
    return out


def relay_helpers(pid: int) -> list[int]:
    """The relay helper processes (movers/xrootd/relayhelper.py) of the campaign ``pid``."""
    try:
        kids = psutil.Process(pid).children()
    except psutil.NoSuchProcess:
        return []
    out = []
    for kid in kids:
        try:
            if "gridxfer.movers.xrootd.relayhelper" in kid.cmdline():
                out.append(kid.pid)
        except psutil.NoSuchProcess:
            pass
    return out


def run_and_kill(case: Case, spec: Path, env: dict, ready) -> dict:
    """Start the campaign, SIGKILL it when ``ready(complete_names, partial_names)`` says so
    (polled on the server's disk), return what the journal and server held at that moment."""
    proc = subprocess.Popen([*gridxfer_cmd(env), "campaign", "run", "--quiet", str(spec)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and proc.poll() is None:
            sizes = disk_sizes(case)
            full = {n for n, s in sizes.items() if n in case.source and s == len(case.source[n])}
            if ready(full, set(sizes) - full):
                break
            time.sleep(0.005)
        helpers = relay_helpers(proc.pid)
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, f"finished before the kill: {out}{err}"
    active = {aid: (name, fid) for aid, name, fid in query(
        case.db, "SELECT a.id, f.name, f.id FROM attempts a JOIN files f ON f.id = a.file_id "
                 "WHERE a.status = 'active'")}
    done = {n for (n,) in query(case.db, "SELECT name FROM files WHERE state = 'done'")}
    view = server_view(case, case.source)
    return {"active": active, "done": done, "view": view, "helpers": helpers}


def opening(case: Case, name: str, wait: float = 10.0) -> bool:
    """Was the empty, not-pending ``name`` a POSC open the server was still making at the
    kill? xrootd creates the file, then marks it pending (``Fchmod(mode|XRDSFS_POSCPEND)``
    in XrdOfs.cc's open), so a stat between the two sees an empty file that looks closed
    (seen once in a fresh-clone run under load). True once the server has marked it
    pending or dropped it with the killed client; False if it stays empty and not pending."""
    deadline = time.time() + wait
    while time.time() < deadline:
        st = server_view(case, [name])[name]
        if st is None or st[1]:
            return True
        time.sleep(0.05)
    return False


def check_at_kill(case: Case, snap: dict) -> None:
    view, active, done = snap["view"], snap["active"], snap["done"]
    assert active, "killed with no attempt active: nothing for recovery to do"
    assert len(done) < len(case.source), "killed after the campaign was done"
    for name, st in view.items():
        if st == (0, False) and case.source[name]:
            assert opening(case, name), f"{name}: an empty file persisted after kill -9"
        elif st is not None and not st[1]:          # closed (persisted) under the final name
            assert (case.ddir / name).read_bytes() == case.source[name], (
                f"{name}: a complete-looking file with the wrong bytes after kill -9")
    for name in done:
        assert view[name] is not None and view[name] == (len(case.source[name]), False), (
            f"{name}: done in the journal but {view[name]} on the server")
    assert not set(done) & {n for n, _ in active.values()}, "a file both done and active"


def check_resumed(case: Case, snap: dict, env: dict, *, checksum: bool) -> dict[str, int]:
    res = subprocess.run([*gridxfer_cmd(env), "campaign", "resume", case.name, "--quiet", "--json"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    out = json.loads(res.stdout)
    assert (out["state"], out["files"]["done"], out["files"]["failed"]) == (
        "done", len(case.source), 0), out
    assert out["run"]["recovered"] == len(snap["active"]), out

    # the journal: campaign done, every file done, no attempt left active
    (state,) = query(case.db, "SELECT value FROM meta WHERE key = 'state'")[0]
    assert state == "done"
    rows = query(case.db, "SELECT name, state, checksum, dst_url FROM files ORDER BY name")
    assert sorted(r[0] for r in rows) == sorted(case.source)
    bad = [r for r in rows if r[1] != "done"]
    assert not bad, f"{len(bad)} files not done, e.g. {bad[:5]}"
    for name, _, cks, dst in rows:
        assert dst == case.base + name
        if checksum:
            assert cks == adler(case.source[name]), (name, cks)
    assert query(case.db, "SELECT count(*) FROM attempts WHERE status = 'active'") == [(0,)]

    # the recovered trail: one event per attempt the killed run left active, outcome by
    # what the server held: a complete non-pending file is kept, anything else redone
    events = [json.loads(d) for (d,) in query(
        case.db, "SELECT detail FROM events WHERE kind = 'recovered' ORDER BY id")]
    got = {e["attempt_id"]: e for e in events}
    assert len(events) == len(got) and set(got) == set(snap["active"]), (
        sorted(got), sorted(snap["active"]))
    outcomes = {"done": 0, "redo": 0, "pending": 0}
    for aid, (name, fid) in snap["active"].items():
        st = snap["view"][name]
        want = "done" if st == (len(case.source[name]), False) else "redo"
        outcomes["pending"] += bool(st and st[1])
        assert (got[aid]["file_id"], got[aid]["outcome"]) == (fid, want), (name, st, got[aid])
        outcomes[want] += 1
    ids = ",".join(map(str, snap["active"]))
    msgs = dict(query(case.db, f"SELECT id, error_msg FROM attempts WHERE id IN ({ids})"))
    assert all(m.startswith("process died; recovered:") for m in msgs.values()), msgs

    # the storage: each file once, the source's bytes, persisted, nothing else there
    assert sorted(os.listdir(case.ddir)) == sorted(case.source), (
        sorted(set(os.listdir(case.ddir)) ^ set(case.source))[:10])
    for name, data in case.source.items():
        assert (case.ddir / name).read_bytes() == data, name
    view = server_view(case, case.source)
    wrong = {n: v for n, v in view.items() if v != (len(case.source[n]), False)}
    assert not wrong, f"server view after resume: {list(wrong.items())[:5]}"
    return outcomes


CHECKSUMS = {"none": "none", "adler32-both": "{algorithm: adler32, verify: both}"}


@pytest.mark.parametrize("cks", CHECKSUMS, ids=CHECKSUMS.keys())
def test_kill9_small_files_then_resume(xrd, gridxfer_home, tmp_path, cks):
    """~1500 files of 1-8 KB: short transfers, dispatched ahead to the gate, results
    lingering before their commit. Killed with 30-60 % of the files at the destination."""
    rnd = random.Random()
    n = 1500
    case, spec = make_case(xrd, gridxfer_home, tmp_path, f"c-small-{cks}",
                           [rnd.randrange(1024, 8193) for _ in range(n)],
                           checksum=CHECKSUMS[cks], max_active=8)
    env = {**os.environ, "GRIDXFER_HOME": str(gridxfer_home)}
    target = int(n * rnd.uniform(0.3, 0.6))
    snap = run_and_kill(case, spec, env, lambda full, partial: len(full) >= target)
    check_at_kill(case, snap)
    outcomes = check_resumed(case, snap, env, checksum=cks != "none")
    print(f"{cks}: {len(snap['done'])} done, {len(snap['active'])} active at the kill; "
          f"recovered {outcomes}")


@pytest.mark.parametrize("helpers", [False, True], ids=["here", "helpers"])
@pytest.mark.parametrize("cks", CHECKSUMS, ids=CHECKSUMS.keys())
def test_kill9_small_files_root_to_root_then_resume(xrd2, gridxfer_home, tmp_path, cks,
                                                    helpers):
    """The same with ~1500 files of 1-8 KB from a root:// source (movers/xrootd/relay.py:
    the final name under POSC, write and close pipelined) and no max_active: the tier's
    default ceiling (128) and the optimizer's short-file ramp. Killed with 30-60 % done.
    The loopback servers count as far (``GRIDXFER_XRD_NEAR_MS=0``). ``here``: the relay
    in C++ (relaynative.py), as built by ``make``, which needs no helper. ``helpers``: the
    Python relay (``GRIDXFER_XRD_NATIVE=0``), so past 16 in flight the relays run in
    helper processes (relaypool.py), killed with it."""
    rnd = random.Random()
    n = 1500
    case, spec = make_case(xrd2, gridxfer_home, tmp_path, f"c-relay-{cks}",
                           [rnd.randrange(1024, 8193) for _ in range(n)],
                           checksum=CHECKSUMS[cks], max_active=None, src_endpoint="crash-src")
    env = {**os.environ, "GRIDXFER_HOME": str(gridxfer_home),
           "GRIDXFER_XRD_NEAR_MS": "0", "GRIDXFER_XRD_NATIVE": "0" if helpers else "1"}
    target = int(n * rnd.uniform(0.3, 0.6))
    snap = run_and_kill(case, spec, env, lambda full, partial: len(full) >= target)
    assert len(snap["helpers"]) == (2 if helpers else 0), snap["helpers"]    # native: none
    if helpers:
        deadline = time.time() + 10
        while any(map(alive, snap["helpers"])) and time.time() < deadline:
            time.sleep(0.05)
        assert not any(map(alive, snap["helpers"])), "helpers outlived the kill"
    check_at_kill(case, snap)
    outcomes = check_resumed(case, snap, env, checksum=cks != "none")
    print(f"{cks}: {len(snap['done'])} done, {len(snap['active'])} active at the kill; "
          f"recovered {outcomes}")


def test_kill9_small_files_leaving_their_slots_before_the_close_then_resume(
        xrd2, gridxfer_home, tmp_path):
    """The same root -> root with adler32, every link counted as far (``FAR_SLOTS``): each
    file leaves its slot once its read-back matched (relay.cpp's ``verified``), so at the
    kill some closes are in flight beyond the cap. Nothing partial, everything verified
    after the resume."""
    rnd = random.Random()
    n = 1500
    case, spec = make_case(xrd2, gridxfer_home, tmp_path, "c-relay-far",
                           [rnd.randrange(1024, 8193) for _ in range(n)],
                           checksum=CHECKSUMS["adler32-both"], max_active=None,
                           src_endpoint="crash-src")
    env = {**os.environ, "GRIDXFER_HOME": str(gridxfer_home), "GXTEST_FAR_SLOTS": "1",
           "GRIDXFER_XRD_NEAR_MS": "0", "GRIDXFER_XRD_NATIVE": "1"}
    target = int(n * rnd.uniform(0.3, 0.6))
    snap = run_and_kill(case, spec, env, lambda full, partial: len(full) >= target)
    check_at_kill(case, snap)
    outcomes = check_resumed(case, snap, env, checksum=True)
    print(f"far slots: {len(snap['done'])} done, {len(snap['active'])} active at the kill; "
          f"recovered {outcomes}")


@pytest.mark.parametrize("cks", CHECKSUMS, ids=CHECKSUMS.keys())
def test_kill9_large_files_then_resume(xrd, gridxfer_home, tmp_path, cks):
    """12 files of 16-32 MB: long transfers leave the link gate at data_done and verify
    beside the next one. Killed while some are done and others still being written."""
    rnd = random.Random()
    sizes = [rnd.randrange(16 * MiB, 32 * MiB) for _ in range(12)]
    case, spec = make_case(xrd, gridxfer_home, tmp_path, f"c-large-{cks}", sizes,
                           checksum=CHECKSUMS[cks], max_active=3)
    env = {**os.environ, "GRIDXFER_HOME": str(gridxfer_home)}
    target = rnd.randrange(4, 8)
    snap = run_and_kill(case, spec, env,
                        lambda full, partial: len(full) >= target and partial)
    check_at_kill(case, snap)
    pending = [n for n, v in snap["view"].items() if v and v[1]]
    assert pending, f"no upload in flight at the kill: {snap['view']}"
    outcomes = check_resumed(case, snap, env, checksum=cks != "none")
    assert outcomes["pending"] >= 1 and outcomes["redo"] >= 1, outcomes
    print(f"{cks}: {len(snap['done'])} done, {len(snap['active'])} active at the kill; "
          f"recovered {outcomes}")
