"""The testbed is its own WLCG token issuer: a signing key, its JWKS, and minted tokens.

No network is involved. The issuer's public keys reach XRootD's SciTokens plugin
(scitokens-cpp) through its key cache, seeded offline: scitokens-cpp (0.7.3 in Debian 12,
``src/scitokens_cache.cpp``) keeps issuers' keys in the SQLite file
``$XDG_CACHE_HOME/scitokens/scitokens_cpp.sqllite``, table
``keycache(issuer text UNIQUE PRIMARY KEY NOT NULL, keys text NOT NULL)``, where ``keys``
is the JSON ``{"jwks": {...}, "next_update": <epoch>, "expires": <epoch>}``. Before
``next_update`` the cached keys are used as they are; after ``expires`` the row is dropped
and the issuer's ``/.well-known/openid-configuration`` would be fetched. We seed both far
in the future, so the (unreachable) issuer URL is never contacted.

Tokens follow the WLCG common JWT profile 1.0: ``wlcg.ver: "1.0"``, ``iss``, ``sub``,
``aud``, ``exp``, ``iat``, ``nbf``, ``jti`` and a space-separated ``scope`` such as
``storage.read:/ storage.create:/sub``. scitokens-cpp 0.7.3 insists on ``iat`` and ``nbf``
(unless the header says ``typ: at+jwt``). Signed ES256 (EC P-256) with PyJWT.

API::

    iss = make_issuer(dir)                      # key (0600) + jwks.json; -> Issuer
    iss = load_issuer(dir)
    tok = mint(iss, ["storage.read:/"], lifetime=600)
    seed_keycache(cache_home, iss)              # for a server with XDG_CACHE_HOME=cache_home
    scitokens_cfg(iss, base_path="/data", default_user="gridxfer")  # plugin config text
    grid_issuer(inv)                            # the issuer of a running testbed (or None)
    check_scopes(["storage.read:/"])            # UsageError for a malformed scope
"""
from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import jwt
from jwt.utils import base64url_encode
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from gridxfer.errors import UsageError
from gridxfer.testbed.inventory import Inventory, TestbedError

ISSUER_URL = "https://issuer.gridxfer-testbed.invalid"
AUDIENCE = "https://gridxfer-testbed.invalid"
SUBJECT = "gridxfer-tester"
KID = "gridxfer-testbed-es256"
KEYCACHE = Path("scitokens") / "scitokens_cpp.sqllite"
_FAR = 10 * 365 * 86400     # keycache next_update / expires: ten years ahead


@dataclass(frozen=True)
class Issuer:
    """The testbed's token issuer; ``key_file`` is the private signing key (0600)."""

    url: str
    audience: str
    kid: str
    key_file: str
    jwks_file: str

    def jwks(self) -> dict:
        return json.loads(Path(self.jwks_file).read_text())


def public_jwk(public: ec.EllipticCurvePublicKey) -> dict:
    """The P-256 key as a JWK, ``x`` and ``y`` each its full 32 bytes (RFC 7518 6.2.1.2).
    Not PyJWT's ``to_jwk``: Debian 12's drops a coordinate's leading zero byte, and its own
    ``from_jwk`` then refuses the key (1 issuer in about 64; a unit test met it)."""
    nums = public.public_numbers()
    return {"kty": "EC", "crv": "P-256", "kid": KID, "alg": "ES256", "use": "sig",
            "x": base64url_encode(nums.x.to_bytes(32, "big")).decode(),
            "y": base64url_encode(nums.y.to_bytes(32, "big")).decode()}


def make_issuer(directory: Path, *, url: str = ISSUER_URL, audience: str = AUDIENCE) -> Issuer:
    """Generate an EC P-256 signing key (0600) and its public JWKS in ``directory``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    key_file, jwks_file = directory / "issuer.key.pem", directory / "jwks.json"
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    jwk = public_jwk(key.public_key())
    jwks_file.write_text(json.dumps({"keys": [jwk]}, indent=2) + "\n")
    os.chmod(jwks_file, 0o644)
    meta = {"url": url, "audience": audience, "kid": KID}
    (directory / "issuer.json").write_text(json.dumps(meta, indent=2) + "\n")
    return Issuer(url=url, audience=audience, kid=KID, key_file=str(key_file),
                  jwks_file=str(jwks_file))


def load_issuer(directory: Path) -> Issuer:
    directory = Path(directory)
    try:
        meta = json.loads((directory / "issuer.json").read_text())
    except (OSError, ValueError) as exc:
        raise TestbedError(f"no testbed token issuer in {directory}: {exc}") from exc
    return Issuer(url=meta["url"], audience=meta["audience"], kid=meta["kid"],
                  key_file=str(directory / "issuer.key.pem"),
                  jwks_file=str(directory / "jwks.json"))


def mint(issuer: Issuer, scopes: Sequence[str], *, lifetime: float = 3600, subject: str = SUBJECT,
         audience: str | None = None, now: float | None = None) -> str:
    """A signed WLCG-profile token with ``scopes`` valid for ``lifetime`` seconds."""
    if not scopes:
        raise TestbedError("a token needs at least one scope (e.g. storage.read:/)")
    now = int(time.time() if now is None else now)
    claims = {"wlcg.ver": "1.0", "iss": issuer.url, "sub": subject,
              "aud": audience or issuer.audience, "scope": " ".join(scopes),
              "iat": now, "nbf": now, "exp": now + int(lifetime), "jti": str(uuid.uuid4())}
    key = Path(issuer.key_file).read_text(encoding="ascii")  # PEM
    return jwt.encode(claims, key, algorithm="ES256", headers={"kid": issuer.kid})


def seed_keycache(cache_home: Path, issuer: Issuer, *, now: float | None = None) -> Path:
    """Write the issuer's JWKS into scitokens-cpp's key cache below ``cache_home``
    (the server's $XDG_CACHE_HOME); returns the SQLite file."""
    now = int(time.time() if now is None else now)
    db_path = Path(cache_home) / KEYCACHE
    db_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(db_path.parent, 0o700)
    os.chmod(cache_home, 0o700)
    value = json.dumps({"jwks": issuer.jwks(), "next_update": now + _FAR, "expires": now + _FAR})
    con = sqlite3.connect(db_path)
    try:
        with con:
            con.execute("CREATE TABLE IF NOT EXISTS keycache ("
                        "issuer text UNIQUE PRIMARY KEY NOT NULL, keys text NOT NULL)")
            con.execute("DELETE FROM keycache WHERE issuer = ?", (issuer.url,))
            con.execute("INSERT INTO keycache VALUES (?, ?)", (issuer.url, value))
    finally:
        con.close()
    os.chmod(db_path, 0o600)
    return db_path


def scitokens_cfg(issuer: Issuer, *, base_path: str = "/data", default_user: str = "") -> str:
    """XrdAccSciTokens' INI config: one issuer, its base path, our audience.

    ``onmissing`` stays at its default (passthrough to the next authorizer; with none
    configured a request without a token is denied)."""
    lines = ["[Global]", f"audience = {issuer.audience}", "",
             "[Issuer gridxfer-testbed]", f"issuer = {issuer.url}", f"base_path = {base_path}"]
    if default_user:
        lines.append(f"default_user = {default_user}")
    return "\n".join(lines) + "\n"


def grid_issuer(inv: Inventory) -> Issuer | None:
    """The token issuer of a running testbed; None for a testbed without one."""
    where = inv.extra.get("issuer")
    if not where:
        return None
    if not isinstance(where, str):
        raise TestbedError("the testbed inventory's issuer is not a directory name")
    return load_issuer(Path(where))


STORAGE_SCOPES = ("storage.read", "storage.create", "storage.modify", "storage.stage")


def check_scopes(scopes: Sequence[str]) -> list[str]:
    """Scopes for :func:`mint`, split on white space; UsageError for a storage scope
    without an absolute path (``storage.read:/`` is the whole namespace)."""
    out = [s for item in scopes for s in item.split()]
    if not out:
        raise UsageError("give at least one scope, e.g. --scope storage.read:/")
    for scope in out:
        authz, sep, path = scope.partition(":")
        if authz in STORAGE_SCOPES and (not sep or not path.startswith("/")):
            raise UsageError(f"scope {scope!r}: a storage scope needs a path, e.g. {authz}:/")
    return out
