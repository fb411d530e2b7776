"""Tape in the dispatcher: files waiting for tape (``archiving``) and tape sources waiting
to be online (``staging``), between the journal, the accounting, the feed and the one
poller thread (``tapepoll.TapePoller``).

- A tier with ``archive: {timeout}``: a file whose copy and checksum succeeded goes to
  ``archiving`` (``copied`` = then) instead of ``done``; it is ``done`` (``on_tape`` =
  when the storage first said so) only on the storage's answer, and ``failed`` with
  class ``archive_timeout`` once ``copied + timeout`` passes without it.
- A source with ``bring_online``: its pending files that were never staged go to
  ``staging`` when the run starts (``stage_requested`` = then, kept across resumes, so
  the deadline is the first request's); each is handed to the feed when its source is
  online (``staged``), or failed with class ``staging``; once every tier's copy of it is
  done or failed for good, the source is released (unpinned) in bulk.

A killed or interrupted run leaves these states in the journal; the next run reloads
them here (``load``), so nothing is copied twice and nothing is declared on tape that
the storage did not say is.
"""
from __future__ import annotations

import sqlite3
from collections.abc import Callable

from gridxfer.errors import ErrorClass, TransferError, UsageError
from gridxfer.redact import redact
from gridxfer.campaign.accounting.stats import Accounting
from gridxfer.campaign.engine.feed import PendingFeed
from gridxfer.campaign.engine.ledger import Batch
from gridxfer.campaign.engine.tapepoll import FIRST_POLL, TapeFor, TapeNews, TapePoller
from gridxfer.campaign.spec.model import CampaignSpec

STAGE_WINDOW = 1000          # source files waiting to be online at once (bring_online)


def _check_capable(spec: CampaignSpec, tape_for: TapeFor) -> None:
    """Refuse, before anything is copied, a tape-backed tier or a staged source whose
    protocol cannot say whether a file is on tape, or whose server does not answer tape
    queries (a plain disk xrootd: "Prepare requestid owned by an unknown server"), in one
    line (exit 2). A server that is down or slow now is not refused: the poller retries."""
    where = [(f"destinations tier {t.name} (archive)", url) for t in spec.destinations
             if t.archive_timeout is not None for url in t.pool]
    if spec.source.bring_online is not None:
        where.append(("source (bring_online)", spec.source.url))
    for what, url in where:
        tape = tape_for(url)
        if tape is None:
            raise UsageError(f"{what}: {redact(url)} cannot report whether a file is on tape "
                             f"(its protocol has no tape operations; root:// has)")
        probe = url.rstrip("/") + "/.gridxfer-tape-probe"
        try:
            tape.archive_status([probe])
        except TransferError as exc:
            if exc.error_class not in (ErrorClass.CONNECTION, ErrorClass.TIMEOUT):
                raise UsageError(f"{what}: {redact(url)} does not answer tape queries, is it "
                                 f"tape-backed? ({redact(str(exc))})") from None


class TapeFlow:
    def __init__(self, conn: sqlite3.Connection, spec: CampaignSpec, acct: Accounting,
                 feed: PendingFeed, tape_for: TapeFor, *, clock: Callable[[], float],
                 wake: Callable[[], None] = lambda: None, first_poll: float = FIRST_POLL
                 ) -> None:
        self.conn, self.acct, self.feed, self.clock = conn, acct, feed, clock
        self.timeouts = {t.name: t.archive_timeout for t in spec.destinations
                         if t.archive_timeout is not None}
        self.staging = spec.source.bring_online
        self.poller: TapePoller | None = None
        if self.timeouts or self.staging:
            self.poller = TapePoller(
                tape_for, clock=clock, wake=wake, first_poll=first_poll,
                pin_lifetime=self.staging.pin_lifetime if self.staging else 0.0,
                stage_timeout=self.staging.timeout if self.staging else 0.0)
        # dst url -> (file id, tier, size, copied), in the order copied (the first waits longest)
        self._dst: dict[str, tuple[int, str, int, float]] = {}
        if self.poller is not None:
            _check_capable(spec, tape_for)
        self._src: dict[str, list[tuple[str, tuple]]] = {}   # src url -> [(tier, feed row)]
        self._stage_cursor, self._stage_more = 0, False       # staging rows not loaded yet
        # staged src url -> (stage request id, ids of its files not finished yet): released
        # once every tier's copy of it is done or failed for good
        self._pinned: dict[str, tuple[str | None, set[int]]] = {}

    def archives(self, tier: str) -> bool:
        return tier in self.timeouts

    def oldest(self, now: float) -> float | None:
        """Seconds the longest-waiting file has waited for tape (None: none waits)."""
        first = next(iter(self._dst.values()), None)
        return max(0.0, now - first[3]) if first is not None else None

    def busy(self) -> bool:
        return bool(self._dst or self._src or self._stage_more)

    # ------------------------------------------------------------ start of a run
    def load(self, now: float) -> None:
        """Files an earlier run left staging or archiving, and (``bring_online``) the
        pending files never staged, handed to the poller. Before the counts are read."""
        if self.poller is None:
            return
        c = self.conn
        if self.staging:
            c.execute("BEGIN IMMEDIATE")
            c.execute("UPDATE files SET state='staging' WHERE state='pending' AND staged IS NULL")
            c.execute("COMMIT")
            self._stage_cursor, self._stage_more = 0, True
            self._refill(now)
        for r in c.execute("SELECT id, tier, dst_url, size, copied FROM files "
                           "WHERE state='archiving' ORDER BY copied"):
            if r[1] in self.timeouts:
                self._archiving(r[0], r[1], r[2], r[3], r[4] or now)
        self.poller.start()

    def _refill(self, now: float) -> None:
        """Hand the poller the next staging files, up to ``STAGE_WINDOW`` sources waiting to
        be online at once (in id order; ``stage_requested`` set when first requested)."""
        if not self._stage_more or len(self._src) > STAGE_WINDOW // 2:
            return
        assert self.poller is not None and self.staging is not None
        limit = STAGE_WINDOW - len(self._src)
        rows = self.conn.execute(
            "SELECT id, name, src_url, size, attempts, expected_checksum, tier, stage_requested "
            "FROM files WHERE state='staging' AND id > ? ORDER BY id LIMIT ?",
            (self._stage_cursor, limit)).fetchall()
        self._stage_more = len(rows) == limit
        if rows:
            self._stage_cursor = rows[-1][0]
        fresh = [(now, r[0]) for r in rows if r[7] is None]
        if fresh:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.executemany("UPDATE files SET stage_requested=? WHERE id=?", fresh)
            self.conn.execute("COMMIT")
        for r in rows:
            self._src.setdefault(r[2], []).append(
                (r[6], (r[0], r[1], r[2], r[3], r[4], r[5], frozenset())))
            if len(self._src[r[2]]) == 1:
                self.poller.stage(r[2], (r[7] or now) + self.staging.timeout)

    # ------------------------------------------------------------ a copy finished
    def copied(self, file_id: int, tier: str, dst_url: str, size: int, now: float) -> None:
        """The file's copy and checksum succeeded on an archive tier: wait for tape."""
        self._archiving(file_id, tier, dst_url, size, now)

    def _archiving(self, file_id: int, tier: str, dst: str, size: int, since: float) -> None:
        assert self.poller is not None
        self._dst[dst] = (file_id, tier, size, since)
        self.poller.archive(dst, since + self.timeouts[tier])

    # ------------------------------------------------------------ the poller's news
    def apply(self, batch: Batch, now: float) -> bool:
        """The poller's news into ``batch`` rows, accounting and the feed. True if any
        (the caller commits at once: a file handed to the feed must be pending in the
        journal before the feed may read it)."""
        if self.poller is None:
            return False
        news = self.poller.take()
        for n in news:
            if n.kind in ("on_tape", "archive_failed"):
                self._archived(n, batch, now)
            else:
                self._staged(n, batch, now)
        self._refill(now)
        return bool(news)

    def _archived(self, n: TapeNews, batch: Batch, now: float) -> None:
        got = self._dst.pop(n.url, None)
        if got is None:
            return
        fid, tier, size, _ = got
        if n.kind == "on_tape":
            batch.tape_rows.append((n.when, now, fid))
        else:
            assert n.error_class is not None
            batch.fail_rows.append((n.error_class.value, n.message, now, fid))
        self.acct.archived(tier, size, ok=n.kind == "on_tape",
                           error_class=n.error_class.value if n.error_class else None)

    def _staged(self, n: TapeNews, batch: Batch, now: float) -> None:
        for tier, row in self._src.pop(n.url, []):
            if n.kind == "online":
                batch.online_rows.append((n.when, now, row[0]))
                self.feed.add(tier, row)
                self._pinned.setdefault(n.url, (n.request, set()))[1].add(row[0])
            else:
                assert n.error_class is not None
                batch.fail_rows.append((n.error_class.value, n.message, now, row[0]))
                self.acct.skipped(tier, 1, row[3], error_class=n.error_class.value)

    def finished(self, src_url: str, file_id: int) -> None:
        """A file's copy is done (or failed for good): its staged source is released once
        no other tier still needs it."""
        pin = self._pinned.get(src_url)
        if pin is None or self.poller is None:
            return
        pin[1].discard(file_id)
        if not pin[1]:
            del self._pinned[src_url]
            self.poller.release(src_url, pin[0])

    def close(self, timeout: float = 10.0) -> None:
        """Stop the poller (a second Ctrl-C waits ``timeout`` for a request in flight)."""
        if self.poller is not None:
            self.poller.close(timeout)
