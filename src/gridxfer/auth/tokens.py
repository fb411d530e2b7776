"""Bearer tokens for clients: what a token says, and whether it will do.

:func:`parse` reads ``exp``, ``scope`` and the other claims of a JWT WITHOUT verifying its
signature (the storage does that). :func:`check_scope` tells whether a token allows an
operation on a path (WLCG common JWT profile 1.0 storage scopes: ``storage.read``,
``storage.create``, ``storage.modify``, ``storage.stage``, each with a path prefix; a
scope path covers itself and everything below it; ``storage.modify`` includes creating)
and names the scope that is missing. :class:`Token` never shows its value in ``repr`` or
``str``, and no message here contains it; :func:`gridxfer.redact.redact` masks any JWT
that escapes elsewhere. Where tokens come from: :mod:`gridxfer.auth.sources`.

API::

    tok = parse(text, origin="token file /run/bt")  # -> Token (TokenError if not a JWT)
    tok.expires_in()                                # seconds left (None: no exp)
    check_scope(tok, "create", "/data/f", base="/data")   # ScopeError names the scope
    check_lifetime(tok, 600)                        # TokenError if it expires sooner
"""
from __future__ import annotations

import posixpath
import time
from dataclasses import dataclass, field
from typing import Literal

from gridxfer.errors import GridxferError
from gridxfer.redact import redact

Operation = Literal["read", "create", "modify", "stage"]
# Which scopes allow an operation, the canonical one first. WLCG profile 1.0:
# storage.modify includes creating new files; storage.stage is a superset of
# storage.read. SciTokens' read:/write: are accepted as XRootD's SciTokens plugin
# accepts them (write = create + modify).
ALLOWED_BY: dict[str, tuple[str, ...]] = {
    "read": ("storage.read", "storage.stage", "read"),
    "stage": ("storage.stage",),
    "create": ("storage.create", "storage.modify", "write"),
    "modify": ("storage.modify", "write"),
}


class TokenError(GridxferError):
    """No usable token: none found, unreadable, not a JWT, expired (exit 1)."""


class ScopeError(TokenError):
    """The token does not allow the operation on the path; the message names the scope."""


@dataclass(frozen=True)
class Scope:
    """One ``authz:path`` scope (``storage.read:/data``); path is None for a scope without one."""

    authz: str
    path: str | None

    def __str__(self) -> str:
        return self.authz if self.path is None else f"{self.authz}:{self.path}"


@dataclass(frozen=True)
class Token:
    value: str = field(repr=False)
    origin: str                            # where it came from (never the token itself)
    claims: dict = field(repr=False, compare=False, hash=False)
    scopes: tuple[Scope, ...] = ()
    expires: float | None = None           # epoch seconds (exp), None if absent

    def __str__(self) -> str:
        return f"<token from {self.origin}>"

    def expires_in(self, now: float | None = None) -> float | None:
        if self.expires is None:
            return None
        return self.expires - (time.time() if now is None else now)

    @property
    def subject(self) -> str:
        return str(self.claims.get("sub", ""))


def parse(value: str, origin: str = "token") -> Token:
    """The claims of a JWT, unverified. TokenError if it is not a JWT."""
    import jwt  # here, not at the top: 35 ms of every campaign start, most have no token

    value = value.strip()
    try:
        claims = jwt.decode(value, options={"verify_signature": False})
    except jwt.PyJWTError as exc:
        raise TokenError(f"the {origin} does not hold a JWT bearer token "
                         f"({redact(str(exc))})") from None
    if not isinstance(claims, dict):
        raise TokenError(f"the {origin} does not hold a JWT bearer token (no claims)")
    exp = claims.get("exp")
    expires = float(exp) if isinstance(exp, (int, float)) and not isinstance(exp, bool) else None
    return Token(value=value, origin=origin, claims=claims,
                 scopes=parse_scopes(claims.get("scope", "")), expires=expires)


def parse_scopes(scope: object) -> tuple[Scope, ...]:
    """``"storage.read:/ storage.create:/a"`` (or a list) -> Scopes; other text is kept
    as a scope without a path (``openid``, ``wlcg``...)."""
    items = (
        scope.split()
        if isinstance(scope, str)
        else [s for s in scope or () if isinstance(s, str)]
        if isinstance(scope, (list, tuple))
        else []
    )
    out = []
    for item in items:
        authz, sep, path = item.partition(":")
        out.append(Scope(authz, _norm(path) if sep and path.startswith("/") else None))
    return tuple(out)


def _norm(path: str) -> str:
    norm = posixpath.normpath("/" + path.lstrip("/"))
    return "/" if norm in ("/", "//") else norm.rstrip("/")


def _covers(scope_path: str, path: str) -> bool:
    return scope_path == "/" or path == scope_path or path.startswith(scope_path + "/")


def check_scope(token: Token, op: Operation, path: str, *, base: str = "/") -> None:
    """ScopeError unless ``token`` allows ``op`` on the server path ``path``.

    Scope paths are relative to ``base``, the path the storage maps the token's ``/``
    to (a server's ``base_path``): with base ``/data``, ``storage.read:/f`` allows
    ``/data/f``. A path outside ``base`` is never allowed."""
    if op not in ALLOWED_BY:
        raise ValueError(f"unknown operation {op!r}")
    base_n, path_n = _norm(base), _norm(path)
    if ".." in path.split("/") or not _covers(base_n, path_n):
        raise ScopeError(f"{path} is outside the token's namespace {base_n} "
                         f"(the {token.origin} cannot allow it)")
    rel = "/" + path_n[len(base_n):].lstrip("/") if base_n != "/" else path_n
    rel = _norm(rel)
    allowed = ALLOWED_BY[op]
    if any(
        s.authz in allowed and s.path is not None and _covers(s.path, rel) for s in token.scopes
    ):
        return
    has = (
        " ".join(str(s) for s in token.scopes if s.authz.startswith(("storage.", "read", "write")))
        or "no storage scope"
    )
    wanted = [a for a in allowed if a.startswith("storage.")]
    alts = " or ".join(f"{a}:{rel}" for a in wanted[1:])
    need = f"{wanted[0]}:{rel}" + (f" (or {alts})" if alts else "")
    raise ScopeError(f"the {token.origin} lacks {need} to {_VERB[op]} {path_n}; it has: {has}")


_VERB = {"read": "read", "stage": "stage", "create": "write", "modify": "overwrite or delete"}


def check_lifetime(token: Token, needed: float, *, now: float | None = None) -> None:
    """TokenError if ``token`` expires within ``needed`` seconds."""
    left = token.expires_in(now)
    if left is not None and left < needed:
        state = "expired" if left <= 0 else f"expires in {left:.0f} s"
        raise TokenError(f"the token from {token.origin} {state}, and {needed:.0f} s are needed")
