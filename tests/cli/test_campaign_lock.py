"""One runner per campaign, with real concurrent processes: `gridxfer campaign run/resume/
cancel` in subprocesses on a file:// campaign. The runner's transfers wait for a gate file
the test creates (a wrapper installs that mover), so the test knows the run is still going
without a fixed sleep: it polls the lock file and the journal."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gridxfer.campaign.journal import lock as lock_mod
from gridxfer.cli.main import main

N_FILES = 6

# The CLI with a mover whose copies wait for $GXTEST_GATE (or a cancel).
GATED = r"""
import os, shutil, zlib
from urllib.parse import urlsplit
from gridxfer.campaign.engine import scheduler
from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import TransferOutcome

GATE = os.environ["GXTEST_GATE"]

class GatedMover:
    def copy(self, src, dst, *, params, progress=None):
        while not os.path.exists(GATE):
            if params.cancel is not None and params.cancel.wait(0.02):
                raise TransferError(ErrorClass.CANCELLED, "cancelled")
        d = urlsplit(dst).path
        os.makedirs(os.path.dirname(d), exist_ok=True)
        shutil.copyfile(urlsplit(src).path, d)
        data = open(d, "rb").read()
        return TransferOutcome(len(data), 0.01, f"{zlib.adler32(data):08x}", 1, "gated")

scheduler.default_mover_factory = lambda s, d, t: GatedMover()
from gridxfer.cli.main import main
main()
"""

# The CLI with a planner that waits for $GXTEST_GATE before listing the source (it
# touches $GXTEST_GATE.planning first): the plan's transaction is open, the journal exists.
PLAN_GATED = r"""
import faulthandler, os, signal, time
faulthandler.register(signal.SIGUSR1, all_threads=True)   # stacks, if a test times out
# a user's Ctrl-C at a terminal: a suite started from a shell without job control (`cmd &`
# in a script) hands every child SIGINT ignored, which the runner rightly keeps while it
# plans (nohup's contract); that made both planning Ctrl-C tests hang in such runs
signal.signal(signal.SIGINT, signal.default_int_handler)
from gridxfer.campaign import runner

real = runner._entries

def gated(spec):
    open(os.environ["GXTEST_GATE"] + ".planning", "w").close()
    while not os.path.exists(os.environ["GXTEST_GATE"]):
        time.sleep(0.02)
    yield from real(spec)

runner._entries = gated
from gridxfer.cli.main import main
main()
"""


@pytest.fixture
def camp(gridxfer_home, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(N_FILES):
        (src / f"f{i}.dat").write_bytes(os.urandom(2000 + i))
    spec = tmp_path / "c1.yaml"
    spec.write_text(f"""campaign: c1
source: {{url: "file://{src}/", files: {{glob: "*.dat"}}}}
destinations:
  - tier: T1
    pool: ["file://{tmp_path}/dst/"]
    max_active: 2
checksum: none
retries: {{max: 1, backoff: 0.01s}}
""")
    env = {**os.environ, "GRIDXFER_HOME": str(gridxfer_home),
           "GXTEST_GATE": str(tmp_path / "gate")}
    return {"spec": spec, "env": env, "gate": tmp_path / "gate", "dst": tmp_path / "dst",
            "db": gridxfer_home / "campaigns" / "c1.sqlite", "procs": []}


@pytest.fixture(autouse=True)
def _reap(request):
    yield
    camp_ = request.node.funcargs.get("camp")
    for p in (camp_ or {}).get("procs", []):
        if p.poll() is None:
            p.kill()
            p.wait()


def start(camp, *args, gated=True, code=GATED) -> subprocess.Popen:
    cmd = [sys.executable, "-c", code] if gated else [sys.executable, "-m", "gridxfer"]
    p = subprocess.Popen([*cmd, "campaign", *args], env=camp["env"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    camp["procs"].append(p)
    return p


def gx(camp, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gridxfer", "campaign", *args],
                          env=camp["env"], capture_output=True, text=True, timeout=120)


def query(db: Path, sql: str):
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def wait_for(what, cond, proc: subprocess.Popen | None = None, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process ended before {what}: {proc.communicate()}")
        try:
            if cond():
                return
        except (sqlite3.Error, OSError):
            pass            # the journal or lock file is not there yet
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def holds_lock(camp, proc) -> bool:
    """``proc`` runs the scheduler (its pid in the journal; it took the lock before)."""
    return query(camp["db"], "SELECT value FROM meta WHERE key='pid'") == [(str(proc.pid),)]


def running(camp, proc) -> None:
    """``proc`` holds the lock and has transfers in flight (waiting at the gate)."""
    wait_for("the run to start", lambda: holds_lock(camp, proc) and query(
        camp["db"], "SELECT count(*) FROM attempts WHERE status='active'")[0][0] > 0, proc)


def refused(res: subprocess.CompletedProcess, pid: int) -> None:
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
    assert f"already being run by pid {pid}" in res.stderr, res.stderr


def finish(camp, proc, rc=0) -> str:
    camp["gate"].touch()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == rc, out + err
    return out


def all_copied(camp) -> None:
    assert sorted(p.name for p in camp["dst"].iterdir()) == [f"f{i}.dat" for i in range(N_FILES)]
    assert query(camp["db"], "SELECT state, count(*) FROM files GROUP BY state") == [
        ("done", N_FILES)]


def test_second_run_replace_and_resume_are_refused_while_one_runs(camp):
    a = start(camp, "run", "--quiet", str(camp["spec"]))
    running(camp, a)
    refused(gx(camp, "run", "--quiet", str(camp["spec"])), a.pid)
    refused(gx(camp, "run", "--quiet", "--replace", str(camp["spec"])), a.pid)
    refused(gx(camp, "resume", "--quiet", "c1"), a.pid)
    assert camp["db"].exists()                              # --replace deleted nothing
    st = json.loads(gx(camp, "status", "--json", "c1").stdout)
    assert st["state"] == "running"
    finish(camp, a)
    all_copied(camp)
    assert query(camp["db"], "SELECT count(*) FROM events WHERE kind='planned'") == [(1,)]


def test_two_resumes_after_kill9_one_recovers(camp):
    a = start(camp, "run", "--quiet", str(camp["spec"]))
    running(camp, a)
    a.send_signal(signal.SIGKILL)
    a.wait()
    active = query(camp["db"], "SELECT count(*) FROM attempts WHERE status='active'")[0][0]
    assert active > 0
    lock_file = camp["db"].with_suffix(".lock")
    stale = lock_file.read_text().strip() if lock_file.exists() else None
    st = json.loads(gx(camp, "status", "--json", "c1").stdout)
    assert st["state"] == "interrupted"
    # two resumes at once: one recovers and runs, the other is refused
    b = start(camp, "resume", "--quiet", "--json", "c1")
    c = start(camp, "resume", "--quiet", "--json", "c1")
    wait_for("one of two resumes to give up", lambda: b.poll() is not None or c.poll() is not None)
    loser, b = (b, c) if b.poll() is not None else (c, b)
    refused(subprocess.CompletedProcess(loser.args, loser.returncode, *loser.communicate()), b.pid)
    wait_for("the resume to recover", lambda: holds_lock(camp, b) and query(
        camp["db"], "SELECT count(*) FROM events WHERE kind='resumed'")[0][0] == 1, b)
    refused(gx(camp, "resume", "--quiet", "c1"), b.pid)
    res = json.loads(finish(camp, b))
    assert res["run"]["recovered"] == active and res["state"] == "done"
    assert stale == str(a.pid)      # the killed runner's pid was there and blocked nobody
    all_copied(camp)
    assert query(camp["db"], "SELECT count(*) FROM events WHERE kind='recovered'") == [(active,)]


def test_cancel_stops_the_runner_resumably(camp):
    a = start(camp, "run", "--quiet", str(camp["spec"]))
    running(camp, a)
    res = gx(camp, "cancel", "c1")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"stopped pid {a.pid}" in res.stdout
    out, err = a.communicate(timeout=60)
    assert a.returncode == 4, out + err             # interrupted, resumable
    assert "gridxfer campaign resume c1" in err
    assert query(camp["db"], "SELECT count(*) FROM files WHERE state <> 'pending'") == [(0,)]
    camp["gate"].touch()
    res = gx(camp, "resume", "--quiet", "c1")
    assert res.returncode == 0, res.stdout + res.stderr
    all_copied(camp)


def planning(camp) -> subprocess.Popen:
    """A `campaign run` stopped inside its plan (journal created, nothing committed)."""
    a = start(camp, "run", "--quiet", str(camp["spec"]), code=PLAN_GATED)
    marker = Path(f"{camp['gate']}.planning")
    wait_for("the plan to start", lambda: marker.exists() and camp["db"].exists(), a)
    return a


def test_cancel_while_planning_then_run_again_just_works(camp):
    """`cancel` during the plan stops the runner; the journal it leaves holds no plan:
    `resume` says in one line what to do, and `run FILE` again just runs (no --replace)."""
    a = planning(camp)
    res = gx(camp, "cancel", "c1")
    assert res.returncode == 0 and f"stopped pid {a.pid}" in res.stdout, res.stdout + res.stderr
    a.communicate(timeout=60)
    res = gx(camp, "resume", "--quiet", "c1")
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "stopped while planning" in res.stderr and "campaign run FILE" in res.stderr
    res = gx(camp, "run", "--quiet", str(camp["spec"]))
    assert res.returncode == 0, res.stdout + res.stderr
    all_copied(camp)
    assert query(camp["db"], "SELECT count(*) FROM events WHERE kind='planned'") == [(1,)]


def ended(a: subprocess.Popen, timeout: float = 60) -> tuple[str, str]:
    """communicate(); a process still there at the deadline is asked for its threads'
    stacks (faulthandler on SIGUSR1) and the test fails with them (a fresh-clone CI run once
    saw this Ctrl-C runner not end in 60 s; not reproduced in 16 runs under load since)."""
    try:
        return a.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        a.send_signal(signal.SIGUSR1)
        time.sleep(1.0)
        a.kill()
        out, err = a.communicate()
        raise AssertionError(f"still running after {timeout:g} s; its stacks:\n{err}") from None


def test_ctrl_c_stops_a_runner_started_with_sigint_blocked(camp):
    """A signal mask is inherited across exec: a runner started from a thread with SIGINT
    blocked (gfal2's first context blocks it in its thread) still stops on Ctrl-C. Full
    make test runs hung here twice: an earlier test had left pytest's thread so."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        a = planning(camp)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    interrupted_while_planning(camp, a, timeout=30)


def interrupted_while_planning(camp, a: subprocess.Popen, timeout: float = 60) -> None:
    """Ctrl-C to a runner stopped in its plan: exit 4, no traceback, no journal."""
    a.send_signal(signal.SIGINT)
    out, err = ended(a, timeout=timeout)
    assert a.returncode == 4 and "Traceback" not in err, out + err
    assert not camp["db"].exists()


def test_ctrl_c_while_planning_keeps_no_journal(camp):
    interrupted_while_planning(camp, planning(camp))
    res = gx(camp, "run", "--quiet", str(camp["spec"]))
    assert res.returncode == 0, res.stdout + res.stderr
    all_copied(camp)


def test_cancel_without_runner_marks_pending_files(camp, capsys):
    a = start(camp, "run", "--quiet", str(camp["spec"]))
    running(camp, a)
    a.send_signal(signal.SIGKILL)                   # leaves attempts active: cancel recovers
    a.wait()
    assert main(["campaign", "cancel", "c1", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["stopped_pid"] is None and res["cancelled"] == N_FILES and res["recovered"] > 0
    assert query(camp["db"], "SELECT state, error_class, count(*) FROM files GROUP BY 1, 2") == [
        ("failed", "cancelled", N_FILES)]
    st = json.loads(gx(camp, "status", "--json", "c1").stdout)
    assert st["state"] == "cancelled"
    camp["gate"].touch()
    res = gx(camp, "resume", "--quiet", "c1")       # the cancelled files are left alone
    assert res.returncode == 3, res.stdout + res.stderr
    assert f"{N_FILES} files cancelled by `gridxfer campaign cancel`" in res.stdout
    assert "--retry-cancelled" in res.stderr and "FAILED" not in res.stdout
    assert not camp["dst"].exists() or not list(camp["dst"].iterdir())
    res = gx(camp, "resume", "--quiet", "--retry-cancelled", "c1")
    assert res.returncode == 0, res.stdout + res.stderr
    all_copied(camp)


def test_cancel_of_a_finished_campaign_changes_nothing(camp, capsys):
    camp["gate"].touch()
    res = gx(camp, "run", "--quiet", str(camp["spec"]))
    assert res.returncode == 0, res.stdout + res.stderr
    assert main(["campaign", "cancel", "c1"]) == 0
    assert "0 pending files cancelled" in capsys.readouterr().out
    assert json.loads(gx(camp, "status", "--json", "c1").stdout)["state"] == "done"
    all_copied(camp)


def test_cancel_of_unknown_campaign_and_lock_holder(camp, capsys):
    assert main(["campaign", "cancel", "nope"]) == 2
    assert "no such campaign journal" in capsys.readouterr().err
    assert not (camp["db"].parent / "nope.lock").exists()
    with lock_mod.CampaignLock("c1"):
        assert lock_mod.holder("c1") == os.getpid()
        with pytest.raises(lock_mod.CampaignBusy, match=f"pid {os.getpid()}"):
            lock_mod.CampaignLock("c1").acquire()
    assert lock_mod.holder("c1") is None
