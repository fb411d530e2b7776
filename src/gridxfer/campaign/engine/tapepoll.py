"""The tape poller: ONE thread (``gridxfer-tape``) that asks tape-backed storage, in bulk,
whether copied files are on tape yet and whether staged sources are online.

The dispatcher hands it URLs with a deadline (``archive``, ``stage``) and takes its news
(``take``): a file on tape, a source online, or either one failed. It never touches the
journal, the accounting or the feed: those stay the dispatcher's (ARCHITECTURE.md).

Every request is bulk, as FTS3 does it: the URLs of one storage endpoint, at most
``movers.tape.MAX_BULK`` (200) per request, never one request per file. Each URL is
polled on its own backoff (``FIRST_POLL`` after it arrives, doubling up to a cap), and the
URLs due at the same time go together. The cap follows the backlog: a request costs the
same for 1 file as for 200, so a small backlog is asked every ``MIN_GAP`` seconds (a file
is seen on tape soon after it is), a large one no more than ``POLL_BUDGET`` file answers
a second, and never less often than every ``MAX_POLL``. A URL past its deadline
is asked once more before it fails, so a file is never failed on a stale answer, and a
file is declared on tape only on the storage's own answer.

Staging: a source is first requested (``bring_online``, pin lifetime and timeout, bulk),
then polled with ``stage_status`` until it is online. A request that fails as a whole
(the server down) is repeated on the next round until the deadline; a file the storage
says is missing, or answers with an error for, fails at once (class ``staging``). Once
every tier's copy of a staged source is done, the dispatcher has it released (``release``,
bulk, best effort: unpinned, as FTS3 does after the transfer).
"""
from __future__ import annotations

import contextlib
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gridxfer.errors import ErrorClass
from gridxfer.movers.capabilities import capabilities_of
from gridxfer.movers.urls import server_of
from gridxfer.redact import redact

MAX_BULK = 200               # files per request (FTS3); movers.tape.MAX_BULK
FIRST_POLL = 1.0             # s after a file arrives, its first poll
MAX_POLL = 60.0              # s: the longest gap between two polls of one file
MIN_GAP = 2.0                # s: the cap for a small backlog
POLL_BUDGET = 2000.0         # file answers per second (10 requests of 200) for a large one

TapeFor = Callable[[str], Any]      # url -> the storage's TapeOps, or None (cannot ask)


@dataclass(frozen=True)
class TapeNews:
    kind: str                        # on_tape | archive_failed | online | staging_failed
    url: str
    when: float
    error_class: ErrorClass | None = None
    message: str | None = None
    request: str | None = None       # online: the stage request's id (for the release)


class _Watch:
    __slots__ = ("deadline", "due", "gap", "request", "last")

    def __init__(self, deadline: float, due: float, gap: float) -> None:
        self.deadline, self.due, self.gap = deadline, due, gap
        self.request: str | None = None     # staging: the stage request's id, once made
        self.last = ""                      # what the storage last said (for the failure)


class TapePoller:
    def __init__(self, tape_for: TapeFor, *, pin_lifetime: float = 3600.0,
                 stage_timeout: float = 3600.0, clock: Callable[[], float] = time.time,
                 first_poll: float = FIRST_POLL, wake: Callable[[], None] = lambda: None
                 ) -> None:
        self._tape_for, self._clock, self._first = tape_for, clock, first_poll
        self._pin, self._stage_timeout, self._wake = pin_lifetime, stage_timeout, wake
        self._lock = threading.Lock()
        self._archive: dict[str, _Watch] = {}
        self._stage: dict[str, _Watch] = {}
        self._news: list[TapeNews] = []
        self._releases: list[tuple[str, str | None]] = []   # (src url, stage request id)
        self._kick = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.requests = 0                   # bulk requests made (tests, bench)

    # ------------------------------------------------------------ the dispatcher's side
    def archive(self, url: str, deadline: float) -> None:
        self._add(self._archive, url, deadline)

    def stage(self, url: str, deadline: float) -> None:
        self._add(self._stage, url, deadline)

    def _add(self, table: dict[str, _Watch], url: str, deadline: float) -> None:
        with self._lock:
            table.setdefault(url, _Watch(deadline, self._clock() + self._first, self._first))
        self._kick.set()

    def release(self, url: str, request: str | None) -> None:
        """Unpin a staged source: every copy of it is done (FTS3 releases after the
        transfer). Best effort, in bulk, on the next round; a storage without
        ``release`` keeps the pin until its lifetime ends."""
        with self._lock:
            self._releases.append((url, request))
        self._kick.set()

    def take(self) -> list[TapeNews]:
        with self._lock:
            news, self._news = self._news, []
        return news

    def waiting(self) -> int:
        with self._lock:
            return len(self._archive) + len(self._stage) + len(self._news)

    def start(self) -> None:
        """Start the thread (once): after the first files were handed over, so a run's
        reloaded files go out in as few requests as they can."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="gridxfer-tape", daemon=True)
            self._thread.start()

    def close(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._kick.set()
        if self._thread is not None:
            self._thread.join(timeout)

    # ------------------------------------------------------------ the thread
    def _run(self) -> None:
        while not self._stop.is_set():
            self._kick.wait(self._sleep())
            self._kick.clear()
            if self._stop.is_set():
                break
            try:
                self.poll_once()
            except Exception as exc:  # noqa: BLE001 - a storage bug must not stop the poller
                self._note_all(f"tape poll failed: {exc}")
        with contextlib.suppress(Exception):
            self._do_releases()             # the last copies' sources are unpinned too

    def _sleep(self) -> float:
        now = self._clock()
        with self._lock:
            dues = [w.due for t in (self._archive, self._stage) for w in t.values()]
        return min(MAX_POLL, max(0.05, min(dues) - now)) if dues else MAX_POLL

    def poll_once(self) -> None:
        """One round: stage requests for new sources, then every due URL asked in bulk."""
        now = self._clock()
        self._do_releases()
        with self._lock:
            unrequested = [u for u, w in self._stage.items() if w.request is None]
            stage_due = [u for u, w in self._stage.items() if w.request is not None
                         and w.due <= now]
            archive_due = [u for u, w in self._archive.items() if w.due <= now]
        for ep, urls in _by_endpoint(unrequested):
            self._request(ep, urls)
        for ep, urls in _by_endpoint(stage_due):
            for rid, group in self._by_request(urls):
                self._ask(ep, group, staging=True, request=rid)
        for ep, urls in _by_endpoint(archive_due):
            self._ask(ep, urls, staging=False, request=None)
        if self._news:
            self._wake()

    def _by_request(self, urls: list[str]) -> list[tuple[str | None, list[str]]]:
        groups: dict[str | None, list[str]] = defaultdict(list)
        with self._lock:
            for u in urls:
                groups[self._stage[u].request if u in self._stage else None].append(u)
        return list(groups.items())

    def _request(self, ep: str, urls: list[str]) -> None:
        tape = self._tape_for(ep + "/")
        for chunk in _chunks(urls):
            if tape is None:
                self._failed(self._stage, chunk, "staging_failed", ErrorClass.STAGING,
                             f"{ep} cannot stage files (its protocol has no tape operations)")
                continue
            try:
                self.requests += 1
                rid = tape.bring_online(chunk, self._pin, self._stage_timeout)
            except Exception as exc:  # noqa: BLE001 - tried again next round
                self._retry_or_fail(self._stage, chunk, f"bring_online: {exc}", staging=True)
                continue
            with self._lock:
                for u in chunk:
                    if u in self._stage:
                        self._stage[u].request = str(rid or "")
                        self._stage[u].due = self._clock() + self._first

    def _do_releases(self) -> None:
        with self._lock:
            releases, self._releases = self._releases, []
        rids = dict(releases)
        for ep, urls in _by_endpoint(list(rids)):
            for rid in {rids[u] for u in urls}:
                self._release(ep, [u for u in urls if rids[u] == rid], rid)

    def _release(self, ep: str, urls: list[str], rid: str | None) -> None:
        tape = self._tape_for(ep + "/")
        release = capabilities_of(tape).release if tape is not None else None
        if release is None:
            return
        for chunk in _chunks(urls):
            with contextlib.suppress(Exception):     # best effort: the pin lifetime ends it
                self.requests += 1
                release(chunk, rid or None)

    def _ask(self, ep: str, urls: list[str], *, staging: bool, request: str | None) -> None:
        table = self._stage if staging else self._archive
        tape = self._tape_for(ep + "/")
        for chunk in _chunks(urls):
            if tape is None:
                self._failed(table, chunk, "staging_failed" if staging else "archive_failed",
                             ErrorClass.STAGING if staging else ErrorClass.ARCHIVE_TIMEOUT,
                             f"{ep} cannot say whether a file is on tape")
                continue
            try:
                self.requests += 1
                answer = (tape.stage_status(chunk, request or None) if staging
                          else tape.archive_status(chunk))
            except Exception as exc:  # noqa: BLE001
                self._retry_or_fail(table, chunk, str(exc), staging=staging)
                continue
            self._judge(table, chunk, answer, staging=staging)

    def _judge(self, table: dict[str, _Watch], chunk: Sequence[str], answer: dict,
               *, staging: bool) -> None:
        now = self._clock()
        done, failed, later = [], [], []
        for u in chunk:
            st = answer.get(u)
            if st is not None and (st.online if staging else st.on_tape):
                done.append(u)
            elif st is not None and staging and str(st.residency) in ("missing", "error"):
                failed.append((u, f"the storage says {st.residency}"
                                  + (f": {st.error}" if st.error else "")))
            else:
                later.append((u, "no answer" if st is None else str(st.residency)))
        with self._lock:
            for u in done:
                w = table.pop(u, None)
                if w is not None:
                    self._news.append(TapeNews("online" if staging else "on_tape", u, now,
                                               request=w.request if staging else None))
        for u, why in failed:
            self._failed(table, [u], "staging_failed", ErrorClass.STAGING, why)
        for u, why in later:
            self._retry_or_fail(table, [u], f"last answer: {why}", staging=staging)

    def _retry_or_fail(self, table: dict[str, _Watch], urls: Sequence[str], why: str,
                       *, staging: bool) -> None:
        now = self._clock()
        over = []
        with self._lock:
            for u in urls:
                w = table.get(u)
                if w is None:
                    continue
                w.last = why
                if now >= w.deadline:
                    over.append(u)
                else:
                    w.gap = min(self._cap(), w.gap * 2)
                    w.due = min(now + w.gap, max(w.deadline, now + 0.05))
        for u in over:
            w = table[u]
            what = "not online" if staging else "not on tape"
            self._failed(table, [u], "staging_failed" if staging else "archive_failed",
                         ErrorClass.STAGING if staging else ErrorClass.ARCHIVE_TIMEOUT,
                         f"{what} by the deadline ({w.last})")

    def _cap(self) -> float:
        """The longest gap between two polls of a file now (under the lock)."""
        backlog = len(self._archive) + len(self._stage)
        return min(MAX_POLL, max(MIN_GAP, backlog / POLL_BUDGET))

    def _failed(self, table: dict[str, _Watch], urls: Sequence[str], kind: str,
                ec: ErrorClass, message: str) -> None:
        now = self._clock()
        with self._lock:
            for u in urls:
                if table.pop(u, None) is not None:
                    self._news.append(TapeNews(kind, u, now, ec, redact(message)))

    def _note_all(self, why: str) -> None:
        for table, staging in ((self._stage, True), (self._archive, False)):
            with self._lock:
                urls = list(table)
            self._retry_or_fail(table, urls, why, staging=staging)


def _by_endpoint(urls: list[str]) -> list[tuple[str, list[str]]]:
    groups: dict[str, list[str]] = defaultdict(list)
    for u in urls:
        groups[server_of(u)].append(u)
    return list(groups.items())


def _chunks(urls: Sequence[str]) -> list[list[str]]:
    return [list(urls[i:i + MAX_BULK]) for i in range(0, len(urls), MAX_BULK)]
