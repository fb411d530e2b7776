"""The FTS3 engine: a planned campaign handed to an FTS3 server, its states polled into the
journal. Runs in the caller's thread (no thread of its own): place -> submit -> poll ->
sleep, until every file is done or failed, or ``stop`` is set (Ctrl-C: polling stops,
the jobs keep running on the server; ``resume`` polls again).

- **Placement** (``place``): each pending file's destination from its tier's pool by
  ``policy.selection.ThroughputAware``, fed with the throughput FTS3 reports per
  endpoint (finished bytes / transfer time) and the bytes already submitted to it. A file
  retried after a failure avoids the endpoints its failed attempts name (the journal's, so
  a resume remembers them) where the pool has another.
- **Submission**: ``jobs.build`` (the field mapping, <= 200 files per job, reuse), each job
  journalled before the POST (``record.intend``) and confirmed after; a job left
  unconfirmed by a killed run is looked up by its deterministic id before any resubmission.
- **Tokens**: a file whose source or destination endpoint has a ``token:`` gets them
  per file from the local engine's grant (``engine.credentials.TokenGate``: lifetime
  for the file's size, storage scopes). A *pause* keeps the tier's files pending (journal
  ``tier_paused``/``tier_resumed``), a *refuse* fails the file as ``auth``. With one
  side's ``token:`` only, the other sends the FTS3 access token (fts-rest takes both lists
  or none, and gives a job without lists that token); a discovered token is not handed on. A job in
  doubt is resubmitted with fresh tokens (the journal keeps none). As in the local
  engine, once no job is open and every tier with files has waited ``TOKEN_WAIT`` for a
  token, the run stops, interrupted and resumable (event ``token_wait_over``).
  A refused file gets its failed attempt row, as a local transfer refused for a scope.
- **Polling**: the unfinished jobs' states in bulk (``client.statuses``) -> ``apply``.
"""
from __future__ import annotations

import logging
import hashlib
import threading
import time
import uuid
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

from gridxfer.campaign.fts3 import record
from gridxfer.campaign.fts3.apply import Apply
from gridxfer.campaign.fts3.client import Conflict, Fts3Client, Transient
from gridxfer.campaign.engine import credentials
from gridxfer.campaign.engine.credentials import Credentials, TokenGate
from gridxfer.campaign.fts3.jobs import BASE_ID, TOKEN_KEYS, FileRow, build
from gridxfer.campaign.journal import store
from gridxfer.campaign.policy.selection import EndpointStats, FileToPlace, ThroughputAware
from gridxfer.campaign.spec.model import CampaignSpec
from gridxfer.movers.base import TokenPair
from gridxfer.movers.names import join_url

log = logging.getLogger(__name__)
POLL_EVERY = 5.0                # seconds between polls (the first ones come sooner)
MAX_TROUBLES = 30               # server errors in a row before the run gives up (resumable)
TOKEN_WAIT = credentials.TOKEN_WAIT     # s: only tiers paused for a token -> stop (resumable)


@dataclass(frozen=True)
class Fts3Run:
    state: str                  # done | partial | interrupted
    jobs_submitted: int
    seconds: float
    paused: str = ""            # interrupted after TOKEN_WAIT: why its tiers waited (no token)


class _Paused(Exception):
    """A tier waits for a fresh enough token (its files stay pending)."""


def job_id(vo: str, sid: str) -> str:
    """fts-rest's deterministic job id: uuid5(uuid5(BASE_ID, vo), sid)."""
    return str(uuid.uuid5(uuid.uuid5(BASE_ID, vo), sid))


class Fts3Engine:
    def __init__(self, conn: Any, spec: CampaignSpec, client: Fts3Client, *,
                 stop: threading.Event | None = None, poll_every: float | None = None,
                 observe: Callable[[], object] | None = None) -> None:
        self.conn, self.spec, self.client = conn, spec, client
        self.stop = stop or threading.Event()
        self.poll_every = POLL_EVERY if poll_every is None else poll_every
        self.observe = observe          # the live view, after each poll
        self.selector = ThroughputAware()
        self.apply = Apply(conn, spec)
        self.submitted = 0
        self.gate = TokenGate(Credentials(spec))
        self.token_wait = TOKEN_WAIT
        record.ensure(conn)
        # the journal's own seed for job ids: resumes keep it, `run --replace` changes it
        created = store.get_meta(conn).get("created", "")
        self.plan_id = hashlib.sha256(created.encode()).hexdigest()[:12] if created else ""

    def _post(self, jid: str, job: dict) -> None:
        """Submit; a 409 for a job the server has under this id is that job, posted before."""
        try:
            got = self.client.submit(job)
        except Conflict:
            if self.client.job(jid) is None:
                raise
            log.info("fts3 job %s is on the server already: taken as submitted", jid)
            return
        if got != jid:
            log.warning("fts3 job id %s, expected %s", got, jid)

    # ------------------------------------------------------------- resume
    def settle_in_doubt(self) -> int:
        """Jobs a killed run wrote but may not have posted: posted now only if the server
        has no job with that id. Returns how many were found on the server."""
        found = 0
        for jid, body in record.in_doubt(self.conn):
            if self.client.job(jid) is not None:
                found += 1
                log.info("fts3 job %s was submitted before the run was killed", jid)
            else:
                import json
                self._post(jid, self._retokened(jid, json.loads(body)))
                self.submitted += 1
            record.submitted(self.conn, jid)
        return found

    # ------------------------------------------------------------- tokens
    def _tokens(self, tier: str, endpoint: str, src: str, dst: str, size: int | None,
                now: float) -> TokenPair | str | None:
        """The file's tokens (None: no side has a ``token:``), or why it fails (class
        ``auth``); ``_Paused`` while its tier waits for a fresh enough token."""
        src_ts = self.spec.source.token
        dst_ts = self.spec.tier(tier).token_for(endpoint)
        if src_ts is None and dst_ts is None:
            return None
        g, events = self.gate.grant(tier, endpoint, src, dst, size, now,
                                    self.apply.throughput.get(endpoint))
        for kind, detail in events:
            store.add_event(self.conn, kind, **detail)
        if g.refuse is not None:
            return g.refuse
        if g.pause is not None:
            raise _Paused(g.pause)
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

    def _retokened(self, jid: str, body: dict[str, Any]) -> dict[str, Any]:
        """An in-doubt job's body (kept without tokens) with its files' tokens again."""
        tier, endpoint = self.conn.execute(
            "SELECT tier, endpoint FROM fts3_jobs WHERE job_id=?", (jid,)).fetchone()
        for f in body.get("files", []):
            try:
                tok = self._tokens(tier, endpoint, f["sources"][0], f["destinations"][0],
                                   f.get("filesize"), time.time())
            except _Paused as exc:
                raise Transient(str(exc)) from None
            if isinstance(tok, TokenPair):
                for key, value in zip(TOKEN_KEYS, (tok.src, tok.dst), strict=True):
                    if value:
                        f[key] = [value]
        return body

    def _refuse(self, file_id: int, tier: str, endpoint: str, dst: str, why: str,
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

    # ------------------------------------------------------------- placement
    def _stats(self, tier: str) -> dict[str, EndpointStats]:
        out = {}
        for ep, pending, nbytes in self.conn.execute(
                "SELECT endpoint, count(*), total(size) FROM files WHERE tier=? AND state IN "
                "('active','staging') AND endpoint IS NOT NULL GROUP BY endpoint", (tier,)):
            out[ep] = EndpointStats(url=ep, pending=pending, pending_bytes=int(nbytes))
        for ep, rate in self.apply.throughput.items():
            st = out.get(ep, EndpointStats(url=ep))
            out[ep] = EndpointStats(url=ep, pending=st.pending, pending_bytes=st.pending_bytes,
                                    throughput=rate)
        return out

    def _failed_at(self, file_id: int) -> set[str]:
        """The endpoints this file failed on (from the journal: a resume remembers them)."""
        return {r[0] for r in self.conn.execute(
            "SELECT endpoint FROM attempts WHERE file_id=? AND status='failed'", (file_id,))}

    def place(self, now: float) -> list[FileRow]:
        rows: list[FileRow] = []
        items = {f.name: f for f in self.spec.source.files}
        by_tier: dict[str, dict[str, EndpointStats]] = {}
        for r in record.pending_rows(self.conn, now):
            tier = self.spec.tier(r["tier"])
            if self.gate.blocked(tier.name, now):
                continue
            if tier.name not in by_tier:
                by_tier[tier.name] = self._stats(tier.name)
            stats = by_tier[tier.name]
            avoid = self._failed_at(r["id"]) if r["attempts"] else set()
            pool = [u for u in tier.pool if u not in avoid] or list(tier.pool)
            ep = self.selector.choose(FileToPlace(r["id"], r["name"], r["size"]), pool, stats)
            item = items.get(r["name"])
            dst = join_url(ep, r["name"])
            try:
                tok = self._tokens(tier.name, ep, r["src_url"], dst, r["size"], now)
            except _Paused:
                continue
            if isinstance(tok, str):
                self._refuse(r["id"], tier.name, ep, dst, tok, now)
                continue
            rows.append(FileRow(r["id"], r["src_url"], dst, ep, tier.name,
                                r["size"], r["expected_checksum"],
                                item.activity if item else None,
                                item.priority if item else None, tok))
            st = stats.get(ep, EndpointStats(url=ep))
            stats[ep] = EndpointStats(url=ep, pending=st.pending + 1,
                                      pending_bytes=st.pending_bytes + r["size"],
                                      throughput=st.throughput)
        return rows

    # ------------------------------------------------------------- submission
    def submit_pending(self, now: float) -> int:
        rows = self.place(now)
        if not rows:
            return 0
        round_ = int(self.conn.execute("SELECT coalesce(max(round), -1) + 1 FROM fts3_jobs")
                     .fetchone()[0])
        dst = {r.file_id: r.dst_url for r in rows}
        staging = self.spec.source.bring_online is not None
        for plan in build(self.spec, rows, round_, self.plan_id):
            jid = job_id(self.client.vo(), plan.sid)
            record.intend(self.conn, jid, plan, round_, dst,
                          self.spec.tier(plan.tier).streams, staging, now)
            self._post(jid, plan.job)
            record.submitted(self.conn, jid)
            store.add_event(self.conn, "fts3_submitted", job_id=jid, tier=plan.tier,
                            endpoint=plan.endpoint, files=len(plan.file_ids))
            self.submitted += 1
            log.info("fts3 job %s: %d files %s -> %s", jid, len(plan.file_ids), plan.tier,
                     plan.endpoint)
        return len(rows)

    # ------------------------------------------------------------- polling
    def poll(self) -> int:
        ids = record.open_jobs(self.conn)
        if ids:
            self.apply.jobs(self.client.statuses(ids), time.time())
        return len(ids)

    def _left(self) -> tuple[int, float | None]:
        n, nb = self.conn.execute(
            "SELECT count(*), min(not_before) FROM files WHERE state='pending'").fetchone()
        return n, nb

    def _token_stall(self, now: float) -> str | None:
        """Every tier with pending files paused for a token since ``token_wait`` (and no
        job open): why, journalled as ``token_wait_over``; else None."""
        waiting = [r[0] for r in self.conn.execute(
            "SELECT DISTINCT tier FROM files WHERE state='pending' ORDER BY tier")]
        since = self.gate.stalled_since(waiting)
        if since is None or now - since < self.token_wait:
            return None
        why = self.gate.message()
        store.add_event(self.conn, "token_wait_over", tiers=waiting, reason=why)
        log.warning("stopped waiting for a token after %.0f s: %s", now - since, why)
        return why

    def run(self) -> Fts3Run:
        t0 = time.time()
        wait, troubles, paused = min(0.5, self.poll_every), 0, ""
        while not self.stop.is_set():
            now = time.time()
            try:
                self.settle_in_doubt()      # a job whose POST got no answer, if any
                self.submit_pending(now)
                open_ = self.poll()
                troubles = 0
            except Transient as exc:        # polled again later; the jobs run on
                troubles += 1
                if troubles > MAX_TROUBLES:
                    raise
                log.warning("%s (%d in a row; trying again)", exc, troubles)
                open_ = 1
            if self.observe is not None:
                self.observe()
            pending, _ = self._left()
            if not open_ and not pending:
                break
            if not open_ and not record.in_doubt(self.conn):
                paused = self._token_stall(time.time()) or ""
                if paused:
                    break
            if self.stop.wait(wait):
                break
            wait = min(self.poll_every, wait * 2)
        failed = self.conn.execute("SELECT count(*) FROM files WHERE state='failed'").fetchone()[0]
        state = "interrupted" if self.stop.is_set() or paused else (
            "partial" if failed else "done")
        return Fts3Run(state, self.submitted, time.time() - t0, paused)
