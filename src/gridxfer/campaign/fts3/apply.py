"""What one FTS3 poll says, written into the journal as a local run writes it: the files'
states (staging, active, archiving, done, failed, pending for a retry), the attempts'
end, bytes, rate and error class; one transaction per poll.

A failed file is retried under the campaign's ``retries`` (exponential backoff from
``retries.backoff``) when its class is retryable; its next submission avoids the endpoints
its failed attempts name (``engine.place``, from the journal) where the pool has another.

A job the server does not know (its 404 entry: purged from the server, or a damaged
journal) ends its files' attempts here: failed as ``other`` ("FTS3 has no job <id>", so
retried under ``retries``), or cancelled while ``campaign cancel`` polls; the job is not
polled again (``record.NO_JOB``), event ``fts3_job_unknown``.
"""
from __future__ import annotations

import calendar
import logging
import sqlite3
import time
from typing import Any

from gridxfer.campaign.fts3 import record, states
from gridxfer.campaign.journal import store
from gridxfer.campaign.journal.store import CANCELLED
from gridxfer.campaign.spec.model import CampaignSpec
from gridxfer.errors import ErrorClass
from gridxfer.redact import redact

log = logging.getLogger(__name__)


def _ts(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return float(calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def _file_id(f: dict[str, Any]) -> int | None:
    meta = f.get("file_metadata")
    if isinstance(meta, dict) and isinstance(meta.get("file_id"), int):
        return int(meta["file_id"])
    return None


class Apply:
    def __init__(self, conn: sqlite3.Connection, spec: CampaignSpec) -> None:
        self.conn, self.spec = conn, spec
        self.throughput: dict[str, float] = {}      # endpoint -> bytes/s FTS3 reported
        self.cancelling = False                      # set by `campaign cancel`'s path
        self.unknown: list[str] = []                 # jobs the server did not know

    def jobs(self, replies: list[dict[str, Any]], now: float) -> None:
        with record.txn(self.conn):
            for job in replies:
                status = str(job.get("http_status", "200"))
                if status.startswith("404"):
                    self._unknown(str(job.get("job_id")), now)
                    continue
                if not status.startswith("2"):
                    log.warning("fts3 job %s: %s", job.get("job_id"), job.get("http_status"))
                    continue
                self._job(job, now)

    def _job(self, job: dict[str, Any], now: float) -> None:
        jid = str(job["job_id"])
        known = record.attempts_of(self.conn, jid)
        endpoint = self.conn.execute("SELECT endpoint FROM fts3_jobs WHERE job_id=?",
                                     (jid,)).fetchone()[0]
        for f in job.get("files") or ():
            fid = _file_id(f)
            if fid is None or fid not in known:
                continue
            aid, was, tier = known[fid]
            new = str(f.get("file_state") or was)
            if new != was:
                self._file(fid, aid, tier, endpoint, was, new, f, now)
                record.file_state(self.conn, aid, new)
        record.job_state(self.conn, jid, str(job.get("job_state") or "ACTIVE"))

    def _unknown(self, jid: str, now: float) -> None:
        row = self.conn.execute("SELECT endpoint FROM fts3_jobs WHERE job_id=?",
                                (jid,)).fetchone()
        if row is None:
            return
        msg = f"FTS3 has no job {jid}"
        new = "CANCELED" if self.cancelling else "FAILED"
        ec = ErrorClass.CANCELLED if self.cancelling else ErrorClass.OTHER
        n = 0
        for fid, (aid, was, _tier) in record.attempts_of(self.conn, jid).items():
            state = self.conn.execute("SELECT state FROM files WHERE id=?", (fid,)).fetchone()
            if was in states.TERMINAL or state is None or \
                    state[0] not in ("active", "staging", "archiving"):
                continue
            self._failed(fid, aid, row[0], was, new, {"reason": msg}, now, ec)
            record.file_state(self.conn, aid, new)
            n += 1
        record.job_state(self.conn, jid, record.NO_JOB)
        store.add_event(self.conn, "fts3_job_unknown", ts=now, job_id=jid, files=n,
                        cancelled=self.cancelling)
        self.unknown.append(jid)
        log.warning("%s (purged from the server, or not this server's): its %d unfinished "
                    "files %s", msg, n,
                    "cancelled" if self.cancelling else "failed (class other; retried "
                    "under the retry policy)")

    def _ended(self, aid: int, status: str, f: dict[str, Any], now: float,
               ec: str | None = None, msg: str | None = None) -> tuple[int, float]:
        nbytes = int(f.get("filesize") or 0) if status == "ok" else 0
        started, ended = _ts(f.get("start_time")), _ts(f.get("finish_time")) or now
        secs = float(f.get("tx_duration") or 0) or max(1e-3, ended - (started or ended))
        self.conn.execute(
            "UPDATE attempts SET status=?, started=coalesce(?, started), ended=?, bytes=?, "
            "rate=?, error_class=?, error_msg=? WHERE id=?",
            (status, started, ended, nbytes, nbytes / secs if nbytes else None, ec, msg, aid))
        return nbytes, secs

    def _file(self, fid: int, aid: int, tier: str, endpoint: str, was: str, new: str,
              f: dict[str, Any], now: float) -> None:
        c = self.conn
        archives = self.spec.tier(tier).archive_timeout is not None
        if was in ("STAGING", "ON_HOLD_STAGING") and new not in ("FAILED", "CANCELED"):
            c.execute("UPDATE files SET staged=?, state='active', updated=? WHERE id=? AND "
                      "state='staging'", (now, now, fid))
        if new in ("STAGING", "ON_HOLD_STAGING"):
            c.execute("UPDATE files SET state='staging', updated=? WHERE id=?", (now, fid))
        elif new == "ARCHIVING" or (new == "FINISHED" and was != "ARCHIVING"):
            nbytes, secs = self._ended(aid, "ok", f, now)
            if nbytes and secs:
                old = self.throughput.get(endpoint)
                rate = nbytes / secs
                self.throughput[endpoint] = rate if old is None else 0.7 * old + 0.3 * rate
            if new == "ARCHIVING":
                c.execute("UPDATE files SET state='archiving', copied=?, error_class=NULL, "
                          "error_msg=NULL, updated=? WHERE id=?", (now, now, fid))
            else:
                c.execute("UPDATE files SET state='done', copied=CASE WHEN ? THEN ? END, "
                          "on_tape=CASE WHEN ? THEN ? END, error_class=NULL, error_msg=NULL, "
                          "updated=? WHERE id=?", (archives, now, archives, now, now, fid))
        elif new == "FINISHED":                 # after ARCHIVING: on tape
            c.execute("UPDATE files SET state='done', on_tape=?, updated=? WHERE id=?",
                      (now, now, fid))
        elif new in ("FAILED", "CANCELED"):
            self._failed(fid, aid, endpoint, was, new, f, now)
        elif new not in ("NOT_USED",):
            c.execute("UPDATE files SET state='active', updated=? WHERE id=? AND "
                      "state IN ('staging','pending')", (now, fid))

    def _failed(self, fid: int, aid: int, endpoint: str, was: str, new: str,
                f: dict[str, Any], now: float, ec: ErrorClass | None = None) -> None:
        c = self.conn
        msg = redact(str(f.get("reason") or new))[:500]
        ec = ec or states.error_class(msg, was=was, canceled=new == "CANCELED")
        if was != "ARCHIVING":
            self._ended(aid, "cancelled" if ec is ErrorClass.CANCELLED else "failed", f, now,
                        ec.value, msg)
        if ec is ErrorClass.CANCELLED:
            c.execute("UPDATE files SET state='failed', error_class=?, error_msg=?, updated=? "
                      "WHERE id=?", (CANCELLED, msg, now, fid))
            return
        tries = c.execute("SELECT attempts FROM files WHERE id=?", (fid,)).fetchone()[0]
        retries = self.spec.retries
        if ec.retryable and tries <= retries.max:
            nb = now + retries.backoff * (2 ** max(0, tries - 1))
            c.execute("UPDATE files SET state='pending', error_class=?, error_msg=?, "
                      "not_before=?, updated=? WHERE id=?", (ec.value, msg, nb, now, fid))
            log.info("retry file %d (attempt %d at %s): %s: %s", fid, tries, endpoint,
                     ec.value, msg)
        else:
            c.execute("UPDATE files SET state='failed', error_class=?, error_msg=?, updated=? "
                      "WHERE id=?", (ec.value, msg, now, fid))
