"""The FTS3 STAND-IN's answers to GET /jobs/<ids> with an id it has no job for, as
fts-rest-flask 3.13.4 gave them (docs/fts3.md, "Checked against the real fts-rest-flask";
its jobs.get counts the ids of the path split at commas, empty ones included)."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from gridxfer.testbed import tokens as testbed_tokens
from gridxfer.testbed.fts3standin import StandIn

UNKNOWN = "00000000-0000-5000-8000-000000000000"


def get(standin: StandIn, path: str) -> tuple[int, object]:
    req = urllib.request.Request(standin.url + path,
                                 headers={"Authorization": f"Bearer {standin.token}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def no_job(job_id: str) -> dict:
    return {"job_id": job_id, "http_status": "404 Not Found",
            "http_message": f'No job with the id "{job_id}" has been found'}


@pytest.fixture
def standin(tmp_path):
    s = StandIn(testbed_tokens.mint(testbed_tokens.make_issuer(tmp_path), ["fts"]))
    s.start()
    yield s
    s.stop()


def test_unknown_job_ids_are_answered_as_the_real_server_answered_them(standin):
    code, reply = standin.submit({"files": [{"sources": ["root://a.example//x"],
                                             "destinations": ["root://b.example//y"]}],
                                  "params": {}})
    assert code == 200
    known = reply["job_id"]
    q = "?files=file_id,file_state"
    assert get(standin, f"/jobs/{UNKNOWN}{q}") == (404, no_job(UNKNOWN))
    code, body = get(standin, f"/jobs/{known},{UNKNOWN}{q}")
    assert code == 207 and [j["http_status"] for j in body] == ["200 Ok", "404 Not Found"]
    assert body[1] == no_job(UNKNOWN) and len(body[0]["files"]) == 1
    assert get(standin, f"/jobs/{UNKNOWN},{q}") == (207, [no_job(UNKNOWN)])
    code, body = get(standin, f"/jobs/{known},{q}")
    assert code == 200 and isinstance(body, list) and body[0]["job_id"] == known
