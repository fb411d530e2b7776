"""gridxfer.auth.tokens: claims read without verification, scope checks, expiry, no leaks."""
from __future__ import annotations

import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from gridxfer.auth.tokens import (ScopeError, TokenError, check_lifetime, check_scope, parse,
                                  parse_scopes)

NOW = 1_800_000_000


def make(scope="storage.read:/", exp: float | None = NOW + 3600, **claims) -> str:
    """A token signed by a key nobody keeps: parse() must not need it."""
    key = ec.generate_private_key(ec.SECP256R1())
    body = {"wlcg.ver": "1.0", "iss": "https://iss.example", "sub": "alice", "aud": "any",
            "scope": scope, **claims}
    if exp is not None:
        body["exp"] = exp
    return jwt.encode(body, key, algorithm="ES256")


def test_claims_are_read_without_verifying_the_signature():
    tok = parse(make("storage.read:/a storage.create:/b/c openid"), "token file /x")
    assert tok.expires == NOW + 3600 and tok.subject == "alice"
    assert [str(s) for s in tok.scopes] == ["storage.read:/a", "storage.create:/b/c", "openid"]
    assert tok.expires_in(now=NOW + 600) == 3000


def test_an_expired_token_is_still_parsed_so_its_expiry_can_be_reported():
    tok = parse(make(exp=time.time() - 10))
    with pytest.raises(TokenError, match="expired, and 600 s are needed"):
        check_lifetime(tok, 600)
    check_lifetime(parse(make(exp=time.time() + 3600)), 600)
    check_lifetime(parse(make(exp=None)), 10**6)        # no exp: nothing to check


def test_the_token_value_never_shows_in_repr_str_or_errors():
    value = make()
    tok = parse(value, "environment variable BEARER_TOKEN")
    sig = value.rsplit(".", 1)[1]
    assert sig not in repr(tok) and sig not in str(tok)
    with pytest.raises(ScopeError) as exc:
        check_scope(tok, "create", "/f")
    assert sig not in str(exc.value) and "BEARER_TOKEN" in str(exc.value)


@pytest.mark.parametrize("text", ["", "not a token", "aaaa.bbbb.cccc", "hunter2hunter2"])
def test_a_non_jwt_is_refused_without_echoing_it(text):
    with pytest.raises(TokenError, match="does not hold a JWT") as exc:
        parse(text, "token file /t")
    assert not text or text not in str(exc.value)


def test_scopes_may_come_as_a_list_and_paths_are_normalised():
    assert [str(s) for s in parse_scopes(["storage.read://a//b/", "x"])] == [
        "storage.read:/a/b",
        "x",
    ]
    assert parse_scopes(None) == () and parse_scopes(42) == ()


ALLOWED = [
    ("storage.read:/", "read", "/any/thing"),
    ("storage.read:/a", "read", "/a"),
    ("storage.read:/a", "read", "/a/b/c"),
    ("storage.stage:/a", "read", "/a/f"),             # stage is a superset of read
    ("storage.create:/a", "create", "/a/new"),
    ("storage.modify:/a", "create", "/a/new"),        # modify implies create
    ("storage.modify:/a", "modify", "/a/old"),
    ("read:/a write:/b", "read", "/a/f"),             # SciTokens 1.0 scopes
    ("read:/a write:/b", "modify", "/b/f"),
]
REFUSED = [
    # not a prefix by path component
    ("storage.read:/a", "read", "/ab", "storage.read:/ab"),
    ("storage.read:/a", "create", "/a/f", "storage.create:/a/f (or storage.modify:/a/f)"),
    # create does not overwrite
    ("storage.create:/a", "modify", "/a/f", "storage.modify:/a/f"),
    ("storage.create:/a", "read", "/a/f", "storage.read:/a/f"),
    ("storage.read:/", "stage", "/a/f", "storage.stage:/a/f"),              # read does not stage
    ("openid", "read", "/f", "storage.read:/f"),
]


@pytest.mark.parametrize("scope,op,path", ALLOWED)
def test_scope_allows(scope, op, path):
    check_scope(parse(make(scope)), op, path)


@pytest.mark.parametrize("scope,op,path,missing", REFUSED)
def test_scope_refusal_names_the_missing_scope(scope, op, path, missing):
    with pytest.raises(ScopeError) as exc:
        check_scope(parse(make(scope), "token file /run/t"), op, path)
    msg = str(exc.value)
    assert f"lacks {missing} " in msg and "token file /run/t" in msg
    assert ("no storage scope" in msg) == (scope == "openid")


def test_scope_paths_are_relative_to_the_servers_base_path():
    tok = parse(make("storage.create:/sub"))
    check_scope(tok, "create", "/data/sub/f", base="/data")
    with pytest.raises(ScopeError, match="lacks storage.create:/other/f "):
        check_scope(tok, "create", "/data/other/f", base="/data/")
    with pytest.raises(ScopeError, match="outside the token's namespace /data"):
        check_scope(parse(make("storage.read:/")), "read", "/etc/passwd", base="/data")
    with pytest.raises(ScopeError, match="outside"):
        check_scope(parse(make("storage.read:/")), "read", "/data/../etc/passwd", base="/data")
