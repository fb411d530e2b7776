"""A file's tokens on the FTS3 engine: the local engine's grant (``engine.credentials``:
lifetime for the file's size, storage scopes) in the form fts-rest takes (both lists or
none: a side without ``token:`` gets the FTS3 access token), granted again for a job in
doubt (the journal keeps no token), and a refused file journalled as the local engine
journals a transfer refused for a scope: a failed ``auth`` attempt.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from gridxfer.campaign.fts3 import record
from gridxfer.campaign.fts3.client import Fts3Client, Transient
from gridxfer.campaign.engine.credentials import TokenGate
from gridxfer.campaign.fts3.jobs import TOKEN_KEYS
from gridxfer.campaign.journal import store
from gridxfer.campaign.spec.model import CampaignSpec
from gridxfer.movers.base import TokenPair

log = logging.getLogger(__name__)


class Paused(Exception):
    """A tier waits for a fresh enough token (its files stay pending)."""


class FileTokens:
    """Per-file tokens from the engine's ``TokenGate``; ``throughput``: the rates FTS3
    reported per endpoint (a token's lifetime is sized from them)."""

    def __init__(self, conn: Any, spec: CampaignSpec, client: Fts3Client, gate: TokenGate,
                 throughput: Mapping[str, float]) -> None:
        self.conn, self.spec, self.client = conn, spec, client
        self.gate, self.throughput = gate, throughput

    def of(self, tier: str, endpoint: str, src: str, dst: str, size: int | None,
           now: float) -> TokenPair | str | None:
        """The file's tokens (None: no side has a ``token:``), or why it fails (class
        ``auth``); ``Paused`` while its tier waits for a fresh enough token."""
        src_ts = self.spec.source.token
        dst_ts = self.spec.tier(tier).token_for(endpoint)
        if src_ts is None and dst_ts is None:
            return None
        g, events = self.gate.grant(tier, endpoint, src, dst, size, now,
                                    self.throughput.get(endpoint))
        for kind, detail in events:
            store.add_event(self.conn, kind, **detail)
        if g.refuse is not None:
            return g.refuse
        if g.pause is not None:
            raise Paused(g.pause)
        if g.tokens is None:
            return None
        s_tok = g.tokens.src if src_ts is not None else None
        d_tok = g.tokens.dst if dst_ts is not None else None
        if (s_tok is None) != (d_tok is None):
            # fts-rest takes both lists or none; the other side gets what the server gives
            # a side without a list: the FTS3 access token
            fill: str | None = getattr(self.client, "access_token", None)
            s_tok, d_tok = s_tok or fill, d_tok or fill
        return TokenPair(src=s_tok, dst=d_tok)

    def retokened(self, jid: str, body: dict[str, Any]) -> dict[str, Any]:
        """An in-doubt job's body (kept without tokens) with its files' tokens again."""
        tier, endpoint = self.conn.execute(
            "SELECT tier, endpoint FROM fts3_jobs WHERE job_id=?", (jid,)).fetchone()
        for f in body.get("files", []):
            try:
                tok = self.of(tier, endpoint, f["sources"][0], f["destinations"][0],
                              f.get("filesize"), time.time())
            except Paused as exc:
                raise Transient(str(exc)) from None
            if isinstance(tok, TokenPair):
                for key, value in zip(TOKEN_KEYS, (tok.src, tok.dst), strict=True):
                    if value:
                        f[key] = [value]
        return body

    def refuse(self, file_id: int, tier: str, endpoint: str, dst: str, why: str,
               now: float) -> None:
        """The file fails as ``auth`` before submission, journalled as a failed attempt
        (the local engine's refused transfer): report, status and --retry-failed see it."""
        why = why.splitlines()[0][:500] if why else "auth"
        with record.txn(self.conn):
            self.conn.execute(
                "INSERT INTO attempts (id, file_id, tier, endpoint, dst_url, started, ended, "
                "streams, mode, status, error_class, error_msg) VALUES "
                "(?,?,?,?,?,?,?,?, 'fts3', 'failed', 'auth', ?)",
                (store.next_attempt_id(self.conn), file_id, tier, endpoint, dst, now, now,
                 self.spec.tier(tier).streams, why))
            self.conn.execute(
                "UPDATE files SET state='failed', error_class='auth', error_msg=?, endpoint=?, "
                "dst_url=?, attempts=attempts+1, updated=? WHERE id=?",
                (why, endpoint, dst, now, file_id))
        log.warning("file %d: %s", file_id, why)
