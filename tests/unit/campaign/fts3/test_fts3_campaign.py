"""Issue 23 on the FTS3 STAND-IN (gridxfer.testbed.fts3standin: not FTS3; it checks each
request as fts-rest-flask's JobBuilder does): a 200-file campaign with two tiers, pools of
two endpoints, tape on one tier and small files with reuse, driven through the official
``fts3`` client by the campaign API."""
from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from gridxfer.campaign import runner
from gridxfer.campaign.cancel import cancel_campaign
from gridxfer.campaign.journal import store
from gridxfer.campaign.fts3 import engine as fts3_engine
from gridxfer.testbed.fts3standin import StandIn

SMALL, BIG = 1_000_000, 2_000_000_000
POOL1 = ("root://disk1.example//store/", "root://disk2.example//store/")
POOL2 = ("root://tape1.example//archive/", "root://tape2.example//archive/")


@dataclass(frozen=True)
class Auth:
    """X.509, as FTS3 takes a tape campaign: fts-rest refuses archive_timeout and
    bring_online from a token-authenticated submission (docs/fts3.md)."""
    proxy: Path
    tls: tuple[str, str, str]


@pytest.fixture
def auth(grid_ca) -> Auth:
    return Auth(Path(grid_ca.proxy), (grid_ca.host_cert, grid_ca.host_key, grid_ca.ca_cert))


def standin_of(auth: Auth, **kw) -> StandIn:
    return StandIn("no-token-here", tls=auth.tls, **kw)


@pytest.fixture
def standin(auth):
    s = standin_of(auth)
    s.start()
    yield s
    s.stop()


def campaign(tmp_path: Path, url: str, proxy: Path, *, files: int = 200,
             extra: str = "", name: str = "fts3camp") -> Path:
    lst = tmp_path / "files.list"
    lst.write_text("".join(f"run1/f{i:04d} {BIG if i % 50 == 0 else SMALL} 0000{i:04x}\n"
                           for i in range(files)))
    f = tmp_path / "c.yaml"
    f.write_text(f"""
campaign: {name}
engine: fts3
fts3: {{endpoint: "{url}", proxy: "{proxy}"}}
source: {{url: "root://source.example//data/", files: {{from: "{lst}"}}}}
retries: {{max: 1, backoff: 0s}}
priority: 4
job_metadata: {{experiment: test}}
destinations:
  - {{tier: disk, pool: ["{POOL1[0]}", "{POOL1[1]}"], nostreams: 4}}
  - {{tier: tape, pool: ["{POOL2[0]}", "{POOL2[1]}"], archive: {{timeout: 2h}}}}
{extra}""")
    return f


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch):
    monkeypatch.setattr(fts3_engine, "POLL_EVERY", 0.05)


def journal(name: str = "fts3camp") -> sqlite3.Connection:
    conn = sqlite3.connect(store.journal_path(name))
    conn.row_factory = sqlite3.Row
    return conn


def test_a_campaign_becomes_correct_fts3_jobs_and_its_states_reach_the_journal(
        tmp_path, gridxfer_home, standin, auth):
    res = runner.run_campaign(campaign(tmp_path, standin.url, auth.proxy))
    assert res.state == "done" and res.files_done == 400 and res.files_failed == 0
    assert standin.refused == [] and standin.duplicates == 0
    jobs = list(standin.jobs.values())
    files = [f for j in jobs for f in standin.files[j["job_id"]]]
    assert len(files) == 400                                # each file once per tier
    assert len({(f["source_surl"], f["dest_surl"]) for f in files}) == 400
    assert all(len(standin.files[j["job_id"]]) <= 200 for j in jobs)
    for j in jobs:
        fs = standin.files[j["job_id"]]
        assert {f["dest_se"] for f in fs} == {j["dest_se"]}      # one endpoint per job
        assert j["priority"] == 4 and j["verify_checksum"] == "b" and j["retry"] == -1
        assert j["job_metadata"]["gridxfer_campaign"] == "fts3camp"
        assert j["job_metadata"]["user"] == {"experiment": "test"}
        small = all(f["user_filesize"] <= 104_857_600 for f in fs)
        assert j["job_type"] == ("Y" if small and len(fs) > 1 else "N")
        tape = fs[0]["dest_surl"].startswith("root://tape")
        assert j["archive_timeout"] == (7200 if tape else -1)
        assert all(f["checksum"].startswith("ADLER32:0000") for f in fs)
        assert all(f["file_metadata"]["gridxfer_campaign"] == "fts3camp" for f in fs)
    assert any(j["job_type"] == "Y" for j in jobs)                 # reuse for small files
    # both endpoints of each pool got files (load-aware placement)
    assert {f["dest_se"] for f in files} == {"root://disk1.example", "root://disk2.example",
                                             "root://tape1.example", "root://tape2.example"}
    conn = journal()
    rows = conn.execute("SELECT tier, state, count(*) n, count(on_tape) t FROM files "
                        "GROUP BY tier, state").fetchall()
    assert {(r["tier"], r["state"], r["n"], r["t"]) for r in rows} == {
        ("disk", "done", 200, 0), ("tape", "done", 200, 200)}
    att = conn.execute("SELECT status, count(*), total(bytes) FROM attempts GROUP BY status"
                       ).fetchall()
    assert [tuple(a) for a in att] == [("ok", 400, 2 * (4 * BIG + 196 * SMALL))]


def test_states_and_failures_map_onto_gridxfer_classes_with_retries_elsewhere(
        tmp_path, gridxfer_home, auth):
    def fail(f):                # disk1 is full; every copy of f0003 misses its source
        if f["dest_se"] == "root://disk1.example":
            return "DESTINATION [28] No space left on device"
        if f["source_surl"].endswith("f0003"):
            return "SOURCE [2] No such file or directory"
        return None
    s = standin_of(auth, fail=fail)
    s.start()
    try:
        res = runner.run_campaign(campaign(tmp_path, s.url, auth.proxy, files=20))
    finally:
        s.stop()
    assert res.state == "partial"
    conn = journal()
    failed = conn.execute("SELECT tier, error_class, attempts FROM files WHERE state='failed'"
                          ).fetchall()
    # source_missing is never retried (one attempt, or two after a no_space on disk1)
    assert sorted(tuple(r)[:2] for r in failed) == [("disk", "source_missing"),
                                                    ("tape", "source_missing")]
    assert [r[2] for r in failed if r[0] == "tape"] == [1]
    # every no_space failure on disk1 went to disk2 and was done there
    moved = conn.execute("SELECT count(*) FROM files WHERE tier='disk' AND state='done' AND "
                         "endpoint=? AND error_class IS NULL", (POOL1[1],)).fetchone()[0]
    assert moved == 19
    classes = {r[0] for r in conn.execute("SELECT error_class FROM attempts WHERE "
                                          "status='failed'")}
    assert classes == {"no_space", "source_missing"}


def test_kill_between_submission_and_journal_write_then_resume_submits_nothing_twice(
        tmp_path, gridxfer_home, auth):
    """`gridxfer campaign run` is killed (SIGKILL) while the server stores its first job,
    before the reply: the job is on the server, the journal never heard of its id."""
    procs: list[subprocess.Popen] = []

    def kill(job):
        procs[0].kill()
        procs[0].wait(timeout=60)
    s = standin_of(auth, on_submit=kill)
    s.start()
    try:
        f = campaign(tmp_path, s.url, auth.proxy, files=20)
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "gridxfer.cli.main", "campaign", "run", "--quiet", str(f)],
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        assert procs[0].wait(timeout=120) == -signal.SIGKILL
        assert len(s.jobs) == 1
        s.on_submit = None
        res = runner.resume_campaign("fts3camp")
        assert res.state == "done" and res.files_done == 40
        assert s.duplicates == 0
        seen = [f["source_surl"] + f["dest_surl"] for j in s.files.values() for f in j]
        assert len(seen) == len(set(seen)) == 40
    finally:
        s.stop()


def test_cancel_cancels_the_fts3_jobs(tmp_path, gridxfer_home, standin, auth, monkeypatch):
    def ctrl_c(self):                   # a Ctrl-C right after the submission, before a poll
        self.stop.set()
        return 1
    poll = fts3_engine.Fts3Engine.poll
    monkeypatch.setattr(fts3_engine.Fts3Engine, "poll", ctrl_c)
    res = runner.run_campaign(campaign(tmp_path, standin.url, auth.proxy, files=20))
    assert res.state == "interrupted"
    assert {j["job_state"] for j in standin.jobs.values()} == {"SUBMITTED"}
    monkeypatch.setattr(fts3_engine.Fts3Engine, "poll", poll)
    out = cancel_campaign("fts3camp")
    assert out.cancelled == 40
    assert (out.fts3_files, out.fts3_jobs) == (40, len(standin.jobs))   # none was pending
    assert {j["job_state"] for j in standin.jobs.values()} == {"CANCELED"}
    conn = journal()
    assert conn.execute("SELECT count(*) FROM files WHERE error_class='cancelled'"
                        ).fetchone()[0] == 40
    assert json.loads(conn.execute("SELECT detail FROM events WHERE kind='fts3_cancelled'"
                                   ).fetchone()[0])["jobs"] == len(standin.jobs)


def test_cancel_says_which_files_were_fts3s(tmp_path, gridxfer_home, standin, auth,
                                            monkeypatch, capsys):
    """Not "40 pending files cancelled": they were in FTS3's jobs, not pending here."""
    from gridxfer.cli.main import main
    poll = fts3_engine.Fts3Engine.poll
    monkeypatch.setattr(fts3_engine.Fts3Engine, "poll", lambda self: self.stop.set() or 1)
    runner.run_campaign(campaign(tmp_path, standin.url, auth.proxy, files=20))
    monkeypatch.setattr(fts3_engine.Fts3Engine, "poll", poll)
    capsys.readouterr()
    assert main(["campaign", "cancel", "fts3camp"]) == 0
    out = capsys.readouterr().out
    assert f"0 pending files and the 40 files of {len(standin.jobs)} FTS3 jobs cancelled" \
        in out, out


def _gx(home: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "GRIDXFER_HOME": str(home), "PYTHONPATH": os.pathsep.join(sys.path)}
    p = subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True,
                       timeout=120)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def test_status_report_and_the_throughput_check_read_an_fts3_campaign(
        tmp_path, gridxfer_home, standin, auth):
    runner.run_campaign(campaign(tmp_path, standin.url, auth.proxy, files=20))
    st = json.loads(_gx(gridxfer_home, "-m", "gridxfer", "campaign", "status", "--json",
                        "--links", "fts3camp").stdout)
    assert st["files"]["done"] == 40 and st["state"] == "done", st
    rep = _gx(gridxfer_home, "-m", "gridxfer", "campaign", "report", "--json", "fts3camp")
    assert rep.returncode == 0
    report = json.loads(rep.stdout)
    assert {e for e in json.dumps(report).split('"') if e.startswith("root://disk")}
    root = Path(__file__).resolve().parents[4]
    chk = _gx(gridxfer_home, str(root / "checks" / "check_gridxfer_throughput"), "-C",
              "fts3camp", "--per-endpoint", "-W", "1h", "--idle", "ok", "--no-learn")
    assert chk.returncode == 0 and "disk1" in chk.stdout, chk.stdout + chk.stderr
    everything = st.__repr__() + rep.stdout + chk.stdout + chk.stderr + \
        b"".join(p.read_bytes() for p in (gridxfer_home / "campaigns").iterdir()).decode(
            "latin-1")
    assert "PRIVATE KEY" not in everything


def test_a_retry_after_resume_still_avoids_the_endpoint_the_file_failed_on(
        tmp_path, gridxfer_home, auth, monkeypatch):
    """The failed endpoint is read from the journal, not kept in memory: a run interrupted
    right after its failures were journalled resumes with them going elsewhere."""
    def fail(f):
        return "DESTINATION [28] No space left on device" \
            if f["dest_se"] == "root://disk1.example" else None
    s = standin_of(auth, fail=fail)
    s.start()
    poll = fts3_engine.Fts3Engine.poll

    def poll_then_stop(self):
        n = poll(self)
        if self.conn.execute("SELECT count(*) FROM files WHERE error_class='no_space'"
                             ).fetchone()[0]:
            self.stop.set()             # Ctrl-C once the failures are in the journal
        return n
    try:
        monkeypatch.setattr(fts3_engine.Fts3Engine, "poll", poll_then_stop)
        res = runner.run_campaign(campaign(tmp_path, s.url, auth.proxy, files=10))
        assert res.state == "interrupted"
        monkeypatch.setattr(fts3_engine.Fts3Engine, "poll", poll)
        res = runner.resume_campaign("fts3camp")
    finally:
        s.stop()
    assert res.state == "done" and res.files_done == 20
    conn = journal()
    retried = conn.execute("SELECT a.file_id FROM attempts a WHERE a.status='failed'"
                           ).fetchall()
    assert retried
    for (fid,) in retried:
        last = conn.execute("SELECT endpoint FROM attempts WHERE file_id=? ORDER BY id DESC "
                            "LIMIT 1", (fid,)).fetchone()[0]
        assert last == POOL1[1]


def test_the_live_view_is_fed_after_each_poll(tmp_path, gridxfer_home, standin, auth):
    seen = []
    res = runner.run_campaign(campaign(tmp_path, standin.url, auth.proxy, files=10),
                              observers=[seen.append])
    assert res.state == "done" and seen
    assert seen[0].files_total == 20 and seen[0].files_done < 20
    assert seen[-1].files_done == 20 and seen[-1].files_active == 0
    assert any(s.files_active for s in seen) and any(s.files_archiving for s in seen)
    from rich.console import Console
    from gridxfer.cli.progress import progress_line, render
    assert "20/20" in progress_line(seen[-1], "fts3camp")
    console = Console(width=100, record=True, file=io.StringIO())
    console.print(render(seen[-1], "fts3camp"))
    assert "fts3camp" in console.export_text()


def test_the_live_view_has_a_row_per_link_from_the_fts3_file_states(tmp_path, gridxfer_home,
                                                                      standin, auth):
    """The stand-in holds its files (a daemon with no free slot) until the first snapshot:
    every file is queued on its link; then they move: active, archiving (tape), done."""
    seen = []

    def observe(snap):
        seen.append(snap)
        standin.hold = False
    standin.hold = True
    res = runner.run_campaign(campaign(tmp_path, standin.url, auth.proxy, files=10),
                              observers=[observe])
    assert res.state == "done"
    first = {ln.tier: ln for ln in seen[0].links}
    assert set(first) == {"disk", "tape"}
    assert all(ln.queued == 10 and ln.active == 0 and ln.files_total == 10
               for ln in first.values()), first
    assert any(ln.active for s in seen for ln in s.links if ln.tier == "disk")
    assert any(ln.archiving for s in seen for ln in s.links if ln.tier == "tape")
    for s in seen:
        for ln in s.links:
            assert ln.active + ln.queued + ln.archiving + ln.done + ln.failed == 10, ln
    assert all(ln.done == 10 and ln.bytes_done == ln.bytes_total for ln in seen[-1].links)
    from rich.console import Console
    from gridxfer.cli.progress import render
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(render(seen[0], "fts3camp"))
    text = console.export_text()
    assert "disk" in text and "tape" in text and "FTS3 schedules" in text, text


def test_a_staged_source_maps_to_bring_online_and_its_staging_reaches_the_journal(
        tmp_path, gridxfer_home, standin, auth):
    f = campaign(tmp_path, standin.url, auth.proxy, files=10)
    f.write_text(f.read_text().replace(
        'source: {url: "root://source.example//data/", ',
        'source: {bring_online: {timeout: 1h, pin_lifetime: 30m}, '
        'url: "root://source.example//data/", '))
    res = runner.run_campaign(f)
    assert res.state == "done" and res.files_done == 20
    for j in standin.jobs.values():
        assert (j["bring_online"], j["copy_pin_lifetime"]) == (3600, 1800)
    conn = journal()
    assert conn.execute("SELECT count(*) FROM files WHERE stage_requested IS NOT NULL AND "
                        "staged >= stage_requested").fetchone()[0] == 20


def test_server_errors_are_waited_out_and_an_unanswered_post_is_not_posted_twice(
        tmp_path, gridxfer_home, standin, auth):
    """The first POST is stored but answered 503, then two status requests fail too."""
    standin.flaky = 3
    res = runner.run_campaign(campaign(tmp_path, standin.url, auth.proxy, files=10))
    assert res.state == "done" and res.files_done == 20
    assert standin.flaky == 0 and standin.duplicates == 0
    seen = [f["source_surl"] + f["dest_surl"] for j in standin.files.values() for f in j]
    assert len(seen) == len(set(seen)) == 20


def test_cancel_while_the_runner_polls_stops_it_and_cancels_the_jobs(tmp_path, gridxfer_home,
                                                                   standin, auth):
    standin.hold = True                 # the jobs stay SUBMITTED: the runner keeps polling
    f = campaign(tmp_path, standin.url, auth.proxy, files=10)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gridxfer.cli.main", "campaign", "run", "--quiet", str(f)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while len(standin.jobs) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        while time.monotonic() < deadline:   # both jobs confirmed in the journal
            try:
                if journal().execute("SELECT count(*) FROM fts3_jobs WHERE submitted=1"
                                     ).fetchone()[0] == len(standin.jobs):
                    break
            except sqlite3.Error:
                pass
            time.sleep(0.05)
        out = cancel_campaign("fts3camp")
        assert out.stopped_pid == proc.pid and out.cancelled == 20
        assert proc.wait(timeout=60) != 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert {j["job_state"] for j in standin.jobs.values()} == {"CANCELED"}
    assert journal().execute("SELECT count(*) FROM files WHERE error_class='cancelled'"
                             ).fetchone()[0] == 20
