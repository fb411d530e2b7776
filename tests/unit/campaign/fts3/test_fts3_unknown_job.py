"""A journal naming a job the FTS3 server does not know (purged from its database, or a
damaged journal), on the FTS3 STAND-IN, which answers as fts-rest-flask 3.13.4 did when
tried: one id -> 404, several -> 207 with a 404 entry for the unknown one.

Before the fix `resume` and `cancel` both ended in "FTS3 status: ..." (exit 1): "not found"
for one job, the whole 207 body (every job with its files) for several."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from gridxfer.campaign.fts3 import engine as fts3_engine
from gridxfer.cli.main import main

NAME = "lost"


def campaign(tmp_path: Path, url: str, token: str, tiers: int) -> Path:
    tok = tmp_path / "tok"
    tok.write_text(token)
    tok.chmod(0o600)
    files = "".join(f"  - {{name: d/f{i}, size: 1000}}\n" for i in range(5))
    dests = "".join(f'  - {{tier: t{n}, pool: ["root://d{n}.example//x/"]}}\n'
                    for n in range(tiers))
    f = tmp_path / "c.yaml"
    f.write_text(f'campaign: {NAME}\nengine: fts3\nfts3: {{endpoint: "{url}", token: '
                 f'{{file: "{tok}"}}}}\nretries: {{max: 1, backoff: 0s}}\nsource:\n'
                 f'  url: "root://s.example//d/"\n  files:\n{files}destinations:\n{dests}')
    return f


def journal(home: Path) -> sqlite3.Connection:
    return sqlite3.connect(home / "campaigns" / f"{NAME}.sqlite")


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch):
    monkeypatch.setattr(fts3_engine, "POLL_EVERY", 0.05)


def submitted_then_ctrl_c(monkeypatch, spec: Path) -> None:
    """`run` submits its jobs and is stopped before its first poll (as by Ctrl-C)."""
    def ctrl_c(self):
        self.stop.set()
        return 1
    poll = fts3_engine.Fts3Engine.poll
    monkeypatch.setattr(fts3_engine.Fts3Engine, "poll", ctrl_c)
    assert main(["campaign", "run", "--quiet", str(spec)]) == 4
    monkeypatch.setattr(fts3_engine.Fts3Engine, "poll", poll)


@pytest.mark.parametrize("tiers, purged", [(1, 1), (2, 1), (2, 2)],
                         ids=["the-only-job", "one-of-two-jobs", "both-jobs"])
def test_resume_fails_a_purged_jobs_files_retries_them_and_goes_on(
        tmp_path, gridxfer_home, standin, jwt, monkeypatch, capsys, tiers, purged):
    """One id: 404 (the client's NotFound); several: 207 with the job entries (some
    found) or with the 404 entries only (none found: the client's ClientError says
    "No job with the id ..." once per id)."""
    submitted_then_ctrl_c(monkeypatch, campaign(tmp_path, standin.url, jwt, tiers))
    lost = sorted(standin.jobs)[:purged]
    for job_id in lost:
        standin.purge(job_id)
    capsys.readouterr()
    assert main(["campaign", "resume", "--quiet", NAME]) == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    assert all(f"FTS3 has no job {j}" in err for j in lost)
    conn = journal(gridxfer_home)
    assert conn.execute("SELECT count(*) FROM files WHERE state='done'").fetchone()[0] \
        == 5 * tiers
    failed = conn.execute("SELECT error_class, error_msg, count(*) FROM attempts WHERE "
                          "status='failed' GROUP BY 1, 2 ORDER BY 2").fetchall()
    assert failed == [("other", f"FTS3 has no job {j}", 5) for j in lost]
    assert conn.execute(f"SELECT count(*) FROM fts3_jobs WHERE job_id IN "
                        f"({','.join('?' * purged)}) AND state='NOT_FOUND'", lost
                        ).fetchone()[0] == purged
    assert len(standin.jobs) == tiers           # the purged jobs' files: new jobs


def test_cancel_cancels_a_purged_jobs_files_here_and_counts_the_job(
        tmp_path, gridxfer_home, standin, jwt, monkeypatch, capsys):
    submitted_then_ctrl_c(monkeypatch, campaign(tmp_path, standin.url, jwt, 2))
    lost, kept = sorted(standin.jobs)
    standin.purge(lost)
    capsys.readouterr()
    assert main(["campaign", "cancel", NAME]) == 0, capsys.readouterr().err
    assert "no record of 1 of its jobs" in capsys.readouterr().out
    assert standin.jobs[kept]["job_state"] == "CANCELED"
    conn = journal(gridxfer_home)
    assert conn.execute("SELECT count(*) FROM files WHERE error_class='cancelled'"
                        ).fetchone()[0] == 10
    detail = json.loads(conn.execute("SELECT detail FROM events WHERE kind='fts3_cancelled'"
                                     ).fetchone()[0])
    assert (detail["jobs"], detail["unknown"], detail["files"]) == (1, 1, 10)


def test_cancel_of_a_job_never_posted_cancels_its_files_and_a_resume_posts_nothing(
        tmp_path, gridxfer_home, standin, jwt, monkeypatch, capsys):
    """A run killed before its POST left the job in doubt and the server never got it:
    cancel must not leave it to be posted by a later resume."""
    submitted_then_ctrl_c(monkeypatch, campaign(tmp_path, standin.url, jwt, 2))
    lost = sorted(standin.jobs)[0]
    standin.purge(lost)
    with journal(gridxfer_home) as conn:
        conn.execute("UPDATE fts3_jobs SET submitted=0 WHERE job_id=?", (lost,))
    capsys.readouterr()
    assert main(["campaign", "cancel", "--json", NAME]) == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    assert out["cancelled"] == 10 and out.get("fts3_unknown") == 1
    posts = len(standin.posts)
    main(["campaign", "resume", "--quiet", NAME])
    assert len(standin.posts) == posts
