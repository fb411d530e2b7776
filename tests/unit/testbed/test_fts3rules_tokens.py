"""The FTS3 STAND-IN's per-file token rules (testbed/fts3rules.py), as fts-rest-flask
3.13.4 applied them when measured on it with MariaDB (docs/fts3.md, "Checked against the
real fts-rest-flask"): each case below is an answer the real server gave."""
from __future__ import annotations

import hashlib
import json
import time

import jwt
import pytest
from fts3.rest.client import easy  # type: ignore[import-untyped]

from gridxfer.testbed import tokens as testbed_tokens
from gridxfer.testbed.fts3rules import Broken, Conflict, Refused, build_job
from gridxfer.testbed.fts3standin import StandIn

SRC, DST = "root://a.example//x", "root://b.example//y"


@pytest.fixture(scope="module")
def issuer(tmp_path_factory) -> testbed_tokens.Issuer:
    return testbed_tokens.make_issuer(tmp_path_factory.mktemp("issuer"))


def body(params=None, **tokens) -> dict:
    return {"files": [{"sources": [SRC], "destinations": [DST], **tokens}],
            "params": {"id_generator": "deterministic", "sid": "s", **(params or {})}}


def sha16(token: str) -> str:
    return hashlib.sha1(token.encode()).hexdigest()[:16]


def test_the_standin_refuses_per_file_tokens_as_the_real_server_did(issuer):
    fts = testbed_tokens.mint(issuer, ["fts"])
    tok = testbed_tokens.mint(issuer, ["storage.read:/"])
    no_nbf = jwt.encode({"iss": "https://i.example", "exp": int(time.time()) + 600,
                         "scope": "storage.read:/", "aud": "x"}, "k" * 32, algorithm="HS256")
    cases = [   # (method, body, exception, message)
        ("oauth2", body(source_tokens=[tok]), Refused,
         "Both source_tokens and destination_tokens are required if one of them is present."),
        ("oauth2", body(source_tokens=[tok, tok], destination_tokens=[tok]), Refused,
         "Length of source_tokens should be equal to the length of sources."),
        ("oauth2", body(source_tokens=["a"], destination_tokens=["b"]), Refused,
         "Token does not contain an iss claim"),
        ("oauth2", body(source_tokens=[no_nbf], destination_tokens=[tok]), Refused,
         "Token does not contain a nbf claim"),
        ("oauth2", body(source_tokens=[42], destination_tokens=[tok]), Broken,
         "token does not have the encode() method"),
        ("oauth2", body({"archive_timeout": 3600}), Refused,
         "Requests to archive to tape using token authentication are not supported"),
        ("oauth2", body({"bring_online": 3600}), Refused,
         "Requests to retrieve from tape using token authentication are not supported"),
        ("certificate", body(source_tokens=[42]), Refused, "Source token is not a string"),
        ("certificate", body(source_tokens=[tok]), Conflict,
         "foreign key constraint fails"),
    ]
    for method, b, exc, message in cases:
        with pytest.raises(exc) as err:
            build_job(b, "vo", "dn", method, 1, fts)
        assert message in str(err.value), (method, b)
        assert tok not in str(err.value) and fts not in str(err.value)
    # a certificate user's token is accepted once a token user stored it (t_token's key)
    job, files, rows = build_job(body(source_tokens=[tok]), "vo", "dn", "certificate", 1,
                                 None, {sha16(tok)})
    assert files[0]["src_token_id"] == sha16(tok) and rows == {}


def test_the_standin_stores_tokens_as_the_real_server_did(issuer):
    """No list: the submitter's token on both sides (single-token mode); lists: their ids
    (sha1, 16 hex digits, t_token's key); a token user's files wait in TOKEN_PREP."""
    fts = testbed_tokens.mint(issuer, ["fts"])
    src = testbed_tokens.mint(issuer, ["storage.read:/"])
    dst = testbed_tokens.mint(issuer, ["storage.create:/"])
    _, files, rows = build_job(body(), "vo", "dn", "oauth2", 1, fts)
    assert (files[0]["src_token_id"], files[0]["dst_token_id"]) == (sha16(fts), sha16(fts))
    assert (files[0]["file_state"], files[0]["file_state_initial"]) == ("TOKEN_PREP",
                                                                        "SUBMITTED")
    _, files, rows = build_job(body(source_tokens=[src], destination_tokens=[dst]), "vo",
                               "dn", "oauth2", 1, fts)
    assert (files[0]["src_token_id"], files[0]["dst_token_id"]) == (sha16(src), sha16(dst))
    assert set(rows) == {sha16(src), sha16(dst)}
    assert rows[sha16(dst)]["scope"] == "storage.create:/" and dst not in str(rows)


def test_through_the_official_client_a_token_job_goes_token_prep_then_on(issuer):
    fts = testbed_tokens.mint(issuer, ["fts"])
    s = StandIn(fts)
    s.start()
    try:
        ctx = easy.Context(s.url, fts_access_token=fts)
        t = easy.new_transfer(SRC, DST)
        t["source_tokens"] = [testbed_tokens.mint(issuer, ["storage.read:/"])]
        with pytest.raises(easy.ClientError, match="Both source_tokens"):
            easy.submit(ctx, easy.new_job([t]))
        jid = easy.submit(ctx, easy.new_job([easy.new_transfer(SRC, DST)]))
        seen = [json.loads(ctx.get(f"/jobs/{jid}?files=file_state"))["files"][0]["file_state"]
                for _ in range(3)]
        assert seen == ["SUBMITTED", "ACTIVE", "FINISHED"]     # after TOKEN_PREP
        assert s.files[jid][0]["file_state_initial"] == "SUBMITTED"
        assert list(s.tokens) == [sha16(fts)] and fts not in str(s.tokens)
    finally:
        s.stop()
