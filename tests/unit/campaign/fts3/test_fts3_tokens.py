"""Per-file bearer tokens in FTS3 submissions (issue 23 on the STAND-IN, which checks them
as fts-rest-flask's JobBuilder does): a ``token:`` source or tier sends each file's tokens
(``source_tokens``/``destination_tokens``) from the local engine's grant (scopes,
lifetime), and no token reaches the journal, the logs or the output."""
from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import threading
from pathlib import Path

import pytest

from gridxfer.campaign import runner
from gridxfer.campaign.fts3 import engine as fts3_engine
from gridxfer.campaign.journal import store
from gridxfer.campaign.report.status import campaign_status
from gridxfer.campaign.report.summary import build_report
from gridxfer.testbed import tokens as testbed_tokens
from gridxfer.testbed.fts3rules import token_id
from gridxfer.testbed.fts3standin import StandIn

POOL = ("root://disk1.example//store/", "root://disk2.example//store/")


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch):
    monkeypatch.setattr(fts3_engine, "POLL_EVERY", 0.05)


@pytest.fixture
def issuer(tmp_path: Path):
    return testbed_tokens.make_issuer(tmp_path / "issuer")


def _write(path: Path, value: str) -> Path:
    path.write_text(value)
    path.chmod(0o600)
    return path


@pytest.fixture
def standin(issuer, tmp_path):
    fts = testbed_tokens.mint(issuer, ["storage.read:/"])
    s = StandIn(fts)
    s.start()
    s.token_file = _write(tmp_path / "fts3.token", fts)
    yield s
    s.stop()


def campaign(tmp_path: Path, s: StandIn, src_tok: Path, dst_tok: Path | None,
             files: int = 6) -> Path:
    dst = f', token: {{file: "{dst_tok}", base: /store}}' if dst_tok else ""
    lst = tmp_path / "files.list"
    lst.write_text("".join(f"run1/f{i:03d} 1000000 0000{i:04x}\n" for i in range(files)))
    f = tmp_path / "c.yaml"
    f.write_text(f"""
campaign: fts3tok
engine: fts3
fts3: {{endpoint: "{s.url}", token: {{file: "{s.token_file}"}}}}
source: {{url: "root://source.example//data/", files: {{from: "{lst}"}},
          token: {{file: "{src_tok}", base: /data}}}}
retries: {{max: 0}}
destinations:
  - {{tier: disk, pool: ["{POOL[0]}", "{POOL[1]}"]{dst}}}
""")
    return f


def test_each_file_carries_its_source_and_destination_tokens_and_none_is_kept(
        tmp_path, gridxfer_home, standin, issuer, caplog, capsys):
    src = testbed_tokens.mint(issuer, ["storage.read:/run1"])
    dst = testbed_tokens.mint(issuer, ["storage.create:/run1"])
    f = campaign(tmp_path, standin, _write(tmp_path / "src.tok", src),
                 _write(tmp_path / "dst.tok", dst))
    caplog.set_level(logging.DEBUG)
    res = runner.run_campaign(f)
    assert res.state == "done" and res.files_done == 6, res
    assert not standin.refused
    sent = [e for body in standin.posts for e in body["files"]]
    assert len(sent) == 6
    assert all(e["source_tokens"] == [src] and e["destination_tokens"] == [dst] for e in sent)
    stored = [r for rows in standin.files.values() for r in rows]
    assert {r["src_token_id"] for r in stored} == {token_id(src)}
    conn = sqlite3.connect(store.journal_path("fts3tok"))
    bodies = [json.loads(b) for (b,) in conn.execute("SELECT body FROM fts3_jobs")]
    assert bodies and all("source_tokens" not in e for b in bodies for e in b["files"])
    conn.close()
    out = capsys.readouterr()
    everything = caplog.text + out.out + out.err + json.dumps([j for j in standin.jobs.values()])
    everything += b"".join(p.read_bytes() for p in (gridxfer_home / "campaigns").iterdir()
                           ).decode("latin-1")
    for tok in (src, dst):
        assert tok not in everything and tok[:40] not in everything and tok[-40:] not in \
            everything


def test_with_a_token_on_one_side_the_other_sends_the_fts3_token(
        tmp_path, gridxfer_home, standin, issuer):
    """fts-rest takes both token lists or none ("Both source_tokens and destination_tokens
    are required if one of them is present.", measured on fts-rest-flask 3.13.4); without
    lists it puts the submitter's token on both sides: the side without ``token:`` gets
    that. Before, the destination list was left out (the real server refused the job)."""
    src = testbed_tokens.mint(issuer, ["storage.read:/run1"])
    res = runner.run_campaign(campaign(tmp_path, standin, _write(tmp_path / "src.tok", src),
                                       None))
    assert res.state == "done" and res.files_done == 6 and not standin.refused, res
    sent = [e for body in standin.posts for e in body["files"]]
    assert all(e["source_tokens"] == [src] and e["destination_tokens"] == [standin.token]
               for e in sent)
    stored = [r for rows in standin.files.values() for r in rows]
    assert {(r["src_token_id"], r["dst_token_id"]) for r in stored} == {
        (token_id(src), token_id(standin.token))}
    conn = sqlite3.connect(store.journal_path("fts3tok"))
    dump = "\n".join(conn.iterdump())
    conn.close()
    assert standin.token[:40] not in dump and src[:40] not in dump


def test_a_token_without_the_destination_scope_fails_its_files_as_auth_unsubmitted(
        tmp_path, gridxfer_home, standin, issuer):
    src = testbed_tokens.mint(issuer, ["storage.read:/run1"])
    dst = testbed_tokens.mint(issuer, ["storage.create:/elsewhere"])
    f = campaign(tmp_path, standin, _write(tmp_path / "src.tok", src),
                 _write(tmp_path / "dst.tok", dst))
    res = runner.run_campaign(f)
    assert res.files_failed == 6 and not standin.posts
    conn = sqlite3.connect(store.journal_path("fts3tok"))
    assert conn.execute("SELECT DISTINCT error_class FROM files").fetchall() == [("auth",)]
    # journalled as a failed attempt, as the local engine journals a refused transfer
    rows = conn.execute("SELECT a.status, a.error_class, a.error_msg, a.endpoint, f.attempts,"
                        " f.endpoint FROM attempts a JOIN files f ON f.id = a.file_id"
                        ).fetchall()
    conn.close()
    assert len(rows) == 6 and {r[:2] for r in rows} == {("failed", "auth")}
    assert all("lacks storage.create:/run1/f" in r[2] for r in rows)
    assert all(r[3] in POOL and r[4] == 1 and r[5] == r[3] for r in rows)
    assert build_report("fts3tok").endpoints and sum(
        g.failures.get("auth", 0) for g in build_report("fts3tok").links) == 6
    st = campaign_status("fts3tok")
    assert st.ended is not None and {f["attempts"] for f in st.failed_files} == {1}
    _write(tmp_path / "dst.tok", testbed_tokens.mint(issuer, ["storage.create:/run1"]))
    res = runner.resume_campaign("fts3tok", retry_failed=True)
    assert res.state == "done" and res.files_done == 6 and len(standin.posts) >= 1, res
    for tok in (src, dst):
        assert tok not in json.dumps(st.to_dict()) and tok[:40] not in json.dumps(st.to_dict())


def _events(kind: str) -> list[dict]:
    conn = sqlite3.connect(store.journal_path("fts3tok"))
    conn.row_factory = sqlite3.Row
    try:
        return list(store.last_events(conn, kind))
    finally:
        conn.close()


def test_a_token_that_would_expire_mid_transfer_pauses_the_tier_until_a_fresh_one(
        tmp_path, gridxfer_home, standin, issuer):
    """The first snapshot sees nothing submitted (the tier paused on a 30 s token, less
    than the margin a transfer needs); the observer then writes a fresh token, which the
    next grant reads: the files go, with the fresh token."""
    src = testbed_tokens.mint(issuer, ["storage.read:/run1"])
    short = testbed_tokens.mint(issuer, ["storage.create:/run1"], lifetime=30)
    fresh = testbed_tokens.mint(issuer, ["storage.create:/run1"])
    dst_file = _write(tmp_path / "dst.tok", short)
    posted_at_first: list[int] = []

    def observe(snap):
        if not posted_at_first:
            posted_at_first.append(len(standin.posts))
            dst_file.write_text(fresh)
    res = runner.run_campaign(campaign(tmp_path, standin, _write(tmp_path / "src.tok", src),
                                       dst_file), observers=[observe])
    assert posted_at_first == [0]
    assert res.state == "done" and res.files_done == 6, res
    sent = [e for body in standin.posts for e in body["files"]]
    assert {e["destination_tokens"][0] for e in sent} == {fresh}
    paused, resumed = _events("tier_paused"), _events("tier_resumed")
    assert len(paused) == 1 and paused[0]["tier"] == "disk" and len(resumed) == 1
    assert short not in json.dumps(paused) and short[:40] not in json.dumps(paused)


def test_a_job_whose_post_went_unanswered_is_posted_again_with_fresh_tokens(
        tmp_path, gridxfer_home, standin, issuer):
    """The first POST is lost (the stand-in forgets the job and answers 503): the journal
    holds the job's body without tokens; the resubmission carries them again."""
    src = testbed_tokens.mint(issuer, ["storage.read:/run1"])
    dst = testbed_tokens.mint(issuer, ["storage.create:/run1"])

    def lose(job):
        if standin.on_submit is not None:
            standin.on_submit = None
            with standin.lock:
                del standin.jobs[job["job_id"]], standin.files[job["job_id"]]
    standin.on_submit, standin.flaky = lose, 1
    res = runner.run_campaign(campaign(tmp_path, standin, _write(tmp_path / "src.tok", src),
                                       _write(tmp_path / "dst.tok", dst)))
    assert res.state == "done" and res.files_done == 6, res
    lost = standin.posts[0]["params"]["sid"]
    again = [p for p in standin.posts[1:] if p["params"]["sid"] == lost]
    assert len(again) == 1 and standin.duplicates == 0
    assert all(e["source_tokens"] == [src] and e["destination_tokens"] == [dst]
               for e in again[0]["files"])


def test_a_tier_paused_for_its_token_stops_the_run_resumable_after_token_wait(
        tmp_path, gridxfer_home, standin, issuer, monkeypatch):
    """The local engine's bound (``credentials.TOKEN_WAIT``): nothing open on the server
    and every tier with files paused that long -> interrupted, resumable, with the reason.
    Before, the FTS3 loop waited forever (the timer's SIGINT ends such a run here)."""
    monkeypatch.setattr(fts3_engine, "TOKEN_WAIT", 0.5)
    src = testbed_tokens.mint(issuer, ["storage.read:/run1"])
    short = testbed_tokens.mint(issuer, ["storage.create:/run1"], lifetime=30)
    dst_file = _write(tmp_path / "dst.tok", short)
    f = campaign(tmp_path, standin, _write(tmp_path / "src.tok", src), dst_file)
    timer = threading.Timer(60, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        res = runner.run_campaign(f)
    finally:
        timer.cancel()
    assert res.state == "interrupted" and res.files_failed == 0 and not standin.posts, res
    assert "expires in" in res.paused and str(dst_file) in res.paused
    over = _events("token_wait_over")
    assert len(over) == 1 and over[0]["tiers"] == ["disk"] and "expires in" in over[0]["reason"]
    assert [p["tier"] for p in campaign_status("fts3tok").paused] == ["disk"]
    assert short not in res.paused + json.dumps(over) and short[:40] not in json.dumps(over)
    dst_file.write_text(testbed_tokens.mint(issuer, ["storage.create:/run1"]))
    res = runner.resume_campaign("fts3tok")
    assert res.state == "done" and res.files_done == 6, res
    assert campaign_status("fts3tok").paused == ()


def test_a_command_token_source_runs_once_a_run(tmp_path, gridxfer_home, standin, issuer):
    """`run` reads ``fts3.token`` before the plan (a bad token refused, nothing journalled)
    and its FTS3 client uses that reading: an ``oidc-token``-like command runs once."""
    count = tmp_path / "count"
    tool = tmp_path / "fts-token"
    tool.write_text(f"#!/bin/sh\necho run >> '{count}'\ncat '{standin.token_file}'\n")
    tool.chmod(0o700)
    src = _write(tmp_path / "src.tok", testbed_tokens.mint(issuer, ["storage.read:/run1"]))
    f = campaign(tmp_path, standin, src, None, files=2)
    f.write_text(f.read_text().replace(f'token: {{file: "{standin.token_file}"}}',
                                       f'token: {{command: ["{tool}"]}}'))
    res = runner.run_campaign(f)
    assert res.files_done == 2
    assert count.read_text().splitlines() == ["run"]
