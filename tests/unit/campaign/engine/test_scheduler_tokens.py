"""The scheduler with token sources: tokens reach the mover, a missing scope fails the
file as auth (no mover call), an expiring token pauses the tier without failing a file,
and a refreshed token file resumes it mid-run."""
from __future__ import annotations

import dataclasses
import os
import threading
import time

import jwt

from gridxfer.campaign.engine.credentials import Credentials
from gridxfer.campaign.journal import store as journal
from gridxfer.campaign.report.status import campaign_status
from gridxfer.campaign.spec.model import TokenSpec
from tests.unit.campaign.engine.test_scheduler import FakeMover, make_spec, plan, run, states


def mint(*scopes: str, lifetime: float = 3600) -> str:
    now = int(time.time())
    return jwt.encode({"scope": " ".join(scopes), "exp": now + int(lifetime), "iat": now},
                      "k" * 32, algorithm="HS256")


def write(path, token: str) -> None:
    tmp = path.with_name(path.name + ".new")
    tmp.touch(mode=0o600)
    tmp.write_text(token + "\n")
    os.replace(tmp, path)


def token_spec(tmp_path, token: str, **kw):
    f = tmp_path / "tok"
    write(f, token)
    spec = make_spec(**kw)
    tier = dataclasses.replace(spec.destinations[0], token=TokenSpec(file=str(f), base="/d"))
    return dataclasses.replace(spec, destinations=(tier,)), f


def events(conn, kind):
    return [r[0] for r in conn.execute("SELECT kind FROM events WHERE kind = ?", (kind,))]


def test_the_tokens_reach_the_mover(gridxfer_home, tmp_path):
    tok = mint("storage.create:/")
    spec, _ = token_spec(tmp_path, tok)
    conn = plan(spec, 4)
    mover = FakeMover()
    _, res = run(conn, spec, mover)
    assert res.state == "done"
    assert {p.tokens.dst for p in mover.params} == {tok}
    assert all(tok not in repr(p) for p in mover.params)


def test_a_missing_scope_fails_each_file_as_auth_without_trying(gridxfer_home, tmp_path):
    spec, _ = token_spec(tmp_path, tok := mint("storage.read:/"), retries=3)
    conn = plan(spec, 3)
    mover = FakeMover()
    _, res = run(conn, spec, mover)
    assert res.state == "partial" and res.files_failed == 3 and mover.calls == []
    rows = conn.execute("SELECT error_class, error_msg, attempts FROM files").fetchall()
    assert {r[0] for r in rows} == {"auth"} and {r[2] for r in rows} == {1}   # never retried
    assert all("lacks storage.create:/f" in r[1] for r in rows)
    dump = "\n".join(str(r) for r in conn.iterdump())
    assert tok.split(".")[2] not in dump


def test_an_expiring_token_pauses_the_tier_and_a_refreshed_file_resumes_it(
        gridxfer_home, tmp_path):
    spec, f = token_spec(tmp_path, mint("storage.create:/", lifetime=20))
    conn = plan(spec, 5)
    mover = FakeMover()
    refreshed = threading.Event()

    def refresh():
        path = journal.journal_path(spec.name)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:           # once the pause is journalled
            c = journal.connect(path)
            try:
                if events(c, "tier_paused"):
                    write(f, mint("storage.create:/"))
                    refreshed.set()
                    return
            finally:
                c.close()
            time.sleep(0.05)

    t = threading.Thread(target=refresh)
    t.start()
    try:
        _, res = run(conn, spec, mover)
    finally:
        t.join()
    assert refreshed.is_set()
    assert res.state == "done" and res.files_failed == 0 and states(conn) == {"done": 5}
    assert events(conn, "tier_paused") == ["tier_paused"]
    assert events(conn, "tier_resumed") == ["tier_resumed"]


def test_a_tier_waiting_only_for_a_token_stops_resumable_after_token_wait(
        gridxfer_home, tmp_path):
    spec, f = token_spec(tmp_path, mint("storage.create:/", lifetime=5))
    conn = plan(spec, 3)
    mover = FakeMover()
    _, res = run(conn, spec, mover, token_wait=0.5,
                 credentials=Credentials(spec))
    assert res.state == "interrupted" and res.files_failed == 0 and mover.calls == []
    assert states(conn) == {"pending": 3}
    reason = conn.execute("SELECT detail FROM events WHERE kind='token_wait_over'").fetchone()[0]
    assert "expires in" in reason and str(f) in reason
    paused = campaign_status(spec.name).paused       # `campaign status` says why
    assert [p["tier"] for p in paused] == ["T0"] and "expires in" in paused[0]["reason"]
    write(f, mint("storage.create:/"))                 # the resume reads the file again
    _, res = run(conn, spec, mover)
    assert res.state == "done" and states(conn) == {"done": 3}
    assert campaign_status(spec.name).paused == ()
