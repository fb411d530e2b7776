"""gridxfer.testbed.tokens: the testbed's own WLCG token issuer and scitokens-cpp's key cache."""
from __future__ import annotations

import json
import sqlite3
import stat
import uuid
from pathlib import Path

import jwt
import pytest

from gridxfer.testbed import tokens as tok_mod
from gridxfer.testbed.inventory import TestbedError


@pytest.fixture
def issuer(tmp_path):
    return tok_mod.make_issuer(tmp_path / "issuer")


def test_the_signing_key_is_private_and_the_jwks_public(issuer):
    key_file = Path(issuer.key_file)
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600 and "PRIVATE KEY" in key_file.read_text()
    (key,) = issuer.jwks()["keys"]
    assert key["kty"] == "EC" and key["crv"] == "P-256" and key["kid"] == issuer.kid
    assert "d" not in key                                   # no private part
    assert tok_mod.load_issuer(key_file.parent) == issuer


def test_minted_tokens_follow_the_wlcg_profile_and_verify_with_the_jwks(issuer):
    tok = tok_mod.mint(issuer, ["storage.read:/", "storage.create:/sub"], lifetime=600,
                       now=1_800_000_000)
    pub = jwt.PyJWK(issuer.jwks()["keys"][0]).key
    claims = jwt.decode(tok, pub, algorithms=["ES256"], audience=issuer.audience,
                        options={"verify_exp": False, "verify_iat": False, "verify_nbf": False})
    assert jwt.get_unverified_header(tok)["kid"] == issuer.kid
    assert claims["wlcg.ver"] == "1.0" and claims["iss"] == issuer.url
    assert claims["scope"] == "storage.read:/ storage.create:/sub"
    assert claims["exp"] - claims["iat"] == 600 and claims["nbf"] == claims["iat"] == 1_800_000_000
    assert claims["sub"] == tok_mod.SUBJECT and uuid.UUID(claims["jti"])
    with pytest.raises(TestbedError, match="at least one scope"):
        tok_mod.mint(issuer, [])


def test_the_keycache_has_scitokens_cpps_schema_and_far_expiry(issuer, tmp_path):
    """scitokens-cpp 0.7.3 (src/scitokens_cache.cpp): $XDG_CACHE_HOME/scitokens/
    scitokens_cpp.sqllite, table keycache(issuer, keys) with keys = {"jwks", "next_update",
    "expires"} (integers); re-seeding replaces the row."""
    cache = tmp_path / "cache"
    cache.mkdir()
    db = tok_mod.seed_keycache(cache, issuer, now=1_000)
    tok_mod.seed_keycache(cache, issuer, now=2_000)
    assert db == cache / "scitokens" / "scitokens_cpp.sqllite"
    assert stat.S_IMODE(db.parent.stat().st_mode) == 0o700
    con = sqlite3.connect(db)
    (sql,) = con.execute("SELECT sql FROM sqlite_master WHERE name = 'keycache'").fetchone()
    assert (
        sql == "CREATE TABLE keycache (issuer text UNIQUE PRIMARY KEY NOT NULL, keys text NOT NULL)"
    )
    rows = con.execute("SELECT issuer, keys FROM keycache").fetchall()
    assert len(rows) == 1 and rows[0][0] == issuer.url
    keys = json.loads(rows[0][1])
    assert keys["jwks"] == issuer.jwks()
    assert keys["next_update"] == keys["expires"] == 2_000 + 10 * 365 * 86400


def test_the_plugin_config_names_issuer_audience_and_base_path(issuer):
    cfg = tok_mod.scitokens_cfg(issuer, base_path="/data", default_user="gridxfer")
    assert "[Global]\naudience = " + issuer.audience in cfg
    assert f"issuer = {issuer.url}\nbase_path = /data\ndefault_user = gridxfer\n" in cfg


def test_a_key_whose_coordinate_has_a_leading_zero_byte_is_a_valid_jwk():
    """About 1 key in 64 has an x or y below 2**248. Debian 12's PyJWT ``to_jwk`` dropped
    that byte, and PyJWT's own ``from_jwk`` (and any strict reader) then refused the key:
    test_testbed_token_cli failed once in 13 runs on it."""
    from cryptography.hazmat.primitives.asymmetric import ec
    for _ in range(5000):
        public = ec.generate_private_key(ec.SECP256R1()).public_key()
        nums = public.public_numbers()
        if min(nums.x, nums.y) < 1 << 248:
            break
    else:
        pytest.fail("no key with a short coordinate in 5000 (chance about 1e-34)")
    jwk = tok_mod.public_jwk(public)
    assert jwt.PyJWK(jwk).key.public_numbers() == nums
