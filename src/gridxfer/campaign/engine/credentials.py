"""Which bearer tokens a transfer takes, and whether it may start with them.

For each side of a transfer whose scheme carries tokens (davs, https, http, root, roots,
xroot), the source's ``token:`` (``SourceSpec.token``) and the destination endpoint's
(``TierSpec.token_for``) name a token source (``auth.sources``); a side without one
follows the WLCG discovery rules, and goes without a token (anonymous or X.509) when
they find none. Before a transfer starts (``Credentials.grant``):

- **lifetime**: the token must outlive the transfer: ``MARGIN + FACTOR x size / rate``
  seconds (``rate``: the endpoint's measured per-transfer rate, EWMA, where the
  dispatcher has it at hand; ``ASSUMED_RATE`` otherwise), at most the campaign's
  ``timeout``. A token that would expire sooner is read
  again (a file that changed, a command run again); still too short, and the grant says
  *pause*: the tier's files wait (``Scheduler``), nothing is failed. A source that gives
  no token at all (a missing file, an unset variable, a failing command) pauses too.
- **scopes**: a token with WLCG storage scopes must allow reading the source path, and
  creating (``overwrite``: modifying) the destination path, relative to the source's
  ``base``. If not, the grant says *refuse*, with the scope that is missing: the file
  fails as ``auth`` (never retried). A token the discovery rules found by themselves is
  not checked (it was not given for this storage), nor is one without storage scopes
  (group-based authorisation: the storage decides).

No message here contains a token (``auth.tokens`` never puts one in its messages).
"""
from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gridxfer.auth.sources import (CommandSource, DiscoverySource, EnvSource, FileSource,
                                   TokenReader, TokenSource, discover)
from gridxfer.auth.tokens import Operation, ScopeError, Token, TokenError, check_scope
from gridxfer.campaign.spec.model import CampaignSpec, TokenSpec
from gridxfer.movers.base import TokenPair
from gridxfer.movers.tokens import host_of
from gridxfer.movers.urls import url_path

log = logging.getLogger(__name__)
TOKEN_SCHEMES = frozenset({"davs", "https", "http", "root", "roots", "xroot", "xroots"})
ASSUMED_RATE = 10e6         # bytes/s per transfer, until the link has measured one
FACTOR = 2.0                # the expected duration, times this
MARGIN = 60.0               # seconds on top: the token must outlive the verification too
SCOPE_PREFIXES = ("storage.", "read:", "write:")
REUSE = 1.0                 # s: a token read this recently is not read again
FILE_RECHECK = 1.0          # s: a paused tier reads its file, variable... again this often
# s: ... and runs its command again this often (the dispatcher waits for a command, up to
# its timeout: a failing `oidc-token` is not run every second)
COMMAND_RECHECK = 30.0
# s: nothing runs and every tier with files waits for a token this long -> the run stops,
# interrupted and resumable (``token_wait_over``); the same bound for both engines
TOKEN_WAIT = 900.0


@dataclass(frozen=True)
class Grant:
    """What a transfer may start with: ``tokens`` (None: no side has one), or a reason
    to ``pause`` its tier, or to ``refuse`` the file (class auth)."""

    tokens: TokenPair | None = None
    pause: str | None = None
    refuse: str | None = None
    retry_in: float = 1.0       # s before a paused tier asks its source again


def source_of(ts: TokenSpec) -> TokenSource:
    if ts.file is not None:
        return FileSource(ts.file)
    if ts.env is not None:
        return EnvSource(ts.env)
    if ts.command:
        return CommandSource(ts.command, ts.timeout)
    return DiscoverySource()


def configured(spec: CampaignSpec) -> list[tuple[str, TokenSpec]]:
    """Each token source the campaign file names (``token:``) for a side that carries
    tokens, once, with the first side it serves: "the source", "tier T2", "tier T2's
    endpoint URL" (a pool entry's own)."""
    sides: list[tuple[str, str, TokenSpec | None]] = [
        ("the source", spec.source.url, spec.source.token)]
    for t in spec.destinations:
        own = dict(t.endpoint_tokens)
        sides += [(f"tier {t.name}'s endpoint {ep}" if ep in own else f"tier {t.name}", ep,
                   t.token_for(ep)) for ep in t.pool]
    out: dict[TokenSource, tuple[str, TokenSpec]] = {}
    for what, url, ts in sides:
        if ts is not None and url.partition(":")[0].lower() in TOKEN_SCHEMES:
            out.setdefault(source_of(ts), (what, ts))
    return list(out.values())


def never_usable(ts: TokenSpec, env: Mapping[str, str] | None = None) -> str | None:
    """Why ``ts`` gives no token now (it is read once): missing or empty, unreadable,
    readable by others, not a JWT, an unset variable, nothing discovered; None when it
    gives one, however short-lived (a renewer may replace it: a run pauses the tier until
    then), and for a command, which is not run for this (its failures pause too). At a
    campaign's start this cannot be the renewal of a file in progress, as it can be
    mid-run, where the tier pauses instead."""
    if ts.command:
        return None
    try:
        TokenReader(source_of(ts), env).get()
    except TokenError as exc:
        return str(exc)
    return None


def needed_seconds(size: int | None, rate: float | None, timeout: float) -> float:
    """How long a token must stay valid for a transfer of ``size`` bytes."""
    per_second = rate if rate and rate > 0 else ASSUMED_RATE
    return min(timeout + MARGIN, MARGIN + FACTOR * max(0, size or 0) / per_second)


class Credentials:
    """The campaign's token sources, one reader each (shared by every side using it).
    Used by the dispatcher thread only."""

    def __init__(self, spec: CampaignSpec, *, env: Mapping[str, str] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.spec, self._env, self.clock = spec, env, clock
        self._readers: dict[TokenSpec, TokenReader] = {}
        self._last: dict[TokenSpec | None, tuple[Token | None, float]] = {}   # None: implicit

    def grant(self, tier: str, endpoint: str, src_url: str, dst_url: str, size: int | None,
              rate: float | None = None) -> Grant:
        need = needed_seconds(size, rate, self.spec.timeout)
        sides = (("source", src_url, self.spec.source.token, "read"),
                 ("destination", dst_url, self.spec.tier(tier).token_for(endpoint),
                  "modify" if self.spec.overwrite else "create"))
        found: dict[str, str | None] = {}
        for side, url, ts, op in sides:
            if url.partition(":")[0].lower() not in TOKEN_SCHEMES:
                found[side] = None
                continue
            try:
                tok = self._token(ts, need)
            except TokenError as exc:
                return Grant(pause=f"tier {tier} paused: no usable token for the {side} "
                                   f"({exc}); it resumes once its token source gives one",
                             retry_in=COMMAND_RECHECK if ts is not None and ts.command
                             else FILE_RECHECK)
            if tok is not None and ts is not None:
                try:
                    check(tok, op, url_path(url), base=ts.base)   # type: ignore[arg-type]
                except ScopeError as exc:
                    return Grant(refuse=str(exc))
            found[side] = tok.value if tok is not None else None
        if not any(found.values()):
            return Grant()
        return Grant(TokenPair(src=found["source"], dst=found["destination"]))

    def source_token(self) -> TokenPair | None:
        """The source's token for listing it (no lifetime asked); TokenError if a
        configured source gives none."""
        if self.spec.source.url.partition(":")[0].lower() not in TOKEN_SCHEMES:
            return None
        tok = self._token(self.spec.source.token, 0.0)
        return TokenPair(src=tok.value) if tok is not None else None

    def by_host(self) -> dict[str, str]:
        """Every endpoint's token (the source's, each pool entry's) by host:port, for a
        resume's clean-up of what a killed run left; a side without one is left out."""
        out: dict[str, str] = {}
        sides = [(self.spec.source.url, self.spec.source.token)]
        sides += [(ep, t.token_for(ep)) for t in self.spec.destinations for ep in t.pool]
        for url, ts in sides:
            if url.partition(":")[0].lower() not in TOKEN_SCHEMES:
                continue
            try:
                tok = self._token(ts, 0.0)
            except TokenError:
                continue
            if tok is not None:
                out.setdefault(host_of(url), tok.value)
        return out

    def _token(self, ts: TokenSpec | None, need: float) -> Token | None:
        """The token of ``ts`` valid for ``need`` seconds; None when the implicit discovery
        (``ts`` None) finds none, or nothing that parses as a token. TokenError: no token,
        or one too short-lived even after a re-read. A token read less than ``REUSE``
        seconds ago is used again without reading (thousands of files a second)."""
        key = ts or _DISCOVERY
        now = self.clock()
        last = self._last.get(ts)
        if last is not None and now - last[1] < REUSE:
            left = last[0].expires_in(now) if last[0] is not None else None
            if left is None or left >= need:
                return last[0]
        tok: Token | None
        if ts is None:
            env = os.environ if self._env is None else self._env
            try:
                found = discover(env)
            except TokenError:
                found = None
            tok = None if found is None else self._reader(key).get(min_validity=need)
        else:
            tok = self._reader(key).get(min_validity=need)
        self._last[ts] = (tok, now)
        return tok

    def _reader(self, key: TokenSpec) -> TokenReader:
        reader = self._readers.get(key)
        if reader is None:
            reader = self._readers[key] = TokenReader(source_of(key), self._env)
        return reader


_DISCOVERY = TokenSpec()


def check(token: Token, op: Operation, path: str, *, base: str) -> None:
    """``auth.tokens.check_scope``, for a token that has storage scopes at all."""
    if any(str(s).startswith(SCOPE_PREFIXES) for s in token.scopes):
        check_scope(token, op, path, base=base)


@dataclass(frozen=True)
class Paused:
    since: float
    reason: str
    recheck: float


class TokenGate:
    """The tiers paused for want of a token: a paused tier dispatches nothing until its
    token source gives a fresh enough token (asked again after ``Grant.retry_in`` s: a
    file or variable every second, a command every 30 s). Journal events: ``tier_paused``
    {tier, reason} once per pause, ``tier_resumed`` {tier, paused_for}."""

    def __init__(self, creds: Credentials) -> None:
        self.creds = creds
        self.paused: dict[str, Paused] = {}

    def blocked(self, tier: str, now: float) -> bool:
        p = self.paused.get(tier)
        return p is not None and now < p.recheck

    def grant(self, tier: str, endpoint: str, src_url: str, dst_url: str, size: int | None,
              now: float, rate: float | None = None) -> tuple[Grant, list[tuple[str, dict]]]:
        g = self.creds.grant(tier, endpoint, src_url, dst_url, size, rate)
        before = self.paused.get(tier)
        if g.pause is not None:
            self.paused[tier] = Paused(before.since if before else now, g.pause,
                                       now + g.retry_in)
            if before is None:
                log.warning("%s", g.pause)          # the one message of this pause
                return g, [("tier_paused", {"tier": tier, "reason": g.pause})]
            return g, []
        if before is not None:
            del self.paused[tier]
            log.warning("tier %s resumed: a fresh token after %.0f s", tier, now - before.since)
            return g, [("tier_resumed", {"tier": tier, "paused_for": round(now - before.since, 3)})]
        return g, []

    def stalled_since(self, tiers: list[str]) -> float | None:
        """When the last of ``tiers`` paused, if every one of them is paused now."""
        if not tiers or any(t not in self.paused for t in tiers):
            return None
        return max(self.paused[t].since for t in tiers)

    def message(self) -> str:
        return "; ".join(f"{p.reason}" for p in self.paused.values())
