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
  The per-file part (grant, access-token fill-in, refusal): ``tokens.py``.
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
from gridxfer.campaign.fts3.tokens import FileTokens, Paused
from gridxfer.campaign.engine import credentials
from gridxfer.campaign.engine.credentials import Credentials, TokenGate
from gridxfer.campaign.fts3.jobs import BASE_ID, FileRow, build
from gridxfer.campaign.journal import store
from gridxfer.campaign.policy.selection import EndpointStats, FileToPlace, ThroughputAware
from gridxfer.campaign.spec.model import CampaignSpec
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
        self.tokens = FileTokens(conn, spec, client, self.gate, self.apply.throughput)
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
                self._post(jid, self.tokens.retokened(jid, json.loads(body)))
                self.submitted += 1
            record.submitted(self.conn, jid)
        return found

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
                tok = self.tokens.of(tier.name, ep, r["src_url"], dst, r["size"], now)
            except Paused:
                continue
            if isinstance(tok, str):
                self.tokens.refuse(r["id"], tier.name, ep, dst, tok, now)
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
