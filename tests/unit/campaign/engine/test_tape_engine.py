"""Campaigns that finish on tape, with an in-test storage double implementing the bulk
TapeOps seam (the real XRootD MSS back end: tests/integration/test_campaign_tape.py).

What is pinned here: a file of an archive tier is done only once the storage says it is
on tape, and fails ``archive_timeout`` otherwise; the storage is asked in bulk (<= 200
per request); a tape source is copied only once online; staging failures are class
``staging``; a stopped run keeps its archiving and staging states and the next run
copies nothing twice; recovery after a kill does not declare a verified copy on tape."""
from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass

import pytest

from gridxfer.campaign.engine import recovery, scheduler
from gridxfer.campaign.journal import planning, store as journal
from gridxfer.campaign.spec.model import (CampaignSpec, ChecksumSpec, RetrySpec, SourceSpec,
                                          StagingSpec, TierSpec)
from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import Entry, TransferOutcome

SRC = "root://src.invalid:1//s/"
TAPE = "root://tape.invalid:1//t/"
DISK = "root://disk.invalid:1//d/"


@dataclass(frozen=True)
class State:
    """movers.tape.TapeState's shape."""
    url: str
    residency: str
    error: str = ""

    @property
    def on_tape(self) -> bool:
        return self.residency in ("on_tape", "tape_only")

    @property
    def online(self) -> bool:
        return self.residency in ("disk_only", "on_tape")


class Storage:
    """Both ends: files copied to it are disk_only until ``migrate`` (or at once with
    ``auto``); sources listed in ``offline`` are tape_only until a stage request for
    them was seen ``stage_polls`` times. Records every bulk request's size."""

    def __init__(self, *, auto: bool = True, offline=(), missing=(), stage_polls: int = 1):
        self.auto, self.offline, self.missing = auto, set(offline), set(missing)
        self.stage_polls = stage_polls
        self.lock = threading.Lock()
        self.on_disk: set[str] = set()
        self.on_tape: set[str] = set()
        self.staged: dict[str, int] = {}
        self.peak_offline = 0                 # most requested sources not online at once
        self.released: list[tuple[str, str, int]] = []    # (src, request id, copies by then)
        self.requests: list[tuple[str, int]] = []
        self.copies: list[tuple[str, str, bool]] = []     # (src, dst, src online at copy time)

    # --- tape ops
    def archive_status(self, urls):
        with self.lock:
            self.requests.append(("archive", len(urls)))
            if self.auto:
                self.on_tape |= {u for u in urls if u in self.on_disk}
            return {u: State(u, "on_tape" if u in self.on_tape else
                             "disk_only" if u in self.on_disk else "missing") for u in urls}

    def bring_online(self, urls, pin_lifetime_s, timeout_s):
        with self.lock:
            self.requests.append(("bring_online", len(urls)))
            for u in urls:
                self.staged.setdefault(u, 0)
            self.peak_offline = max(self.peak_offline, sum(
                1 for u in self.staged if not self.online(u)))
        return "req-1"

    def stage_status(self, urls, request_id=None):
        with self.lock:
            self.requests.append(("stage", len(urls)))
            out = {}
            for u in urls:
                if u in self.missing:
                    out[u] = State(u, "missing")
                    continue
                if u in self.staged:
                    self.staged[u] += 1
                online = u not in self.offline or self.staged.get(u, 0) >= self.stage_polls
                out[u] = State(u, "on_tape" if online else "tape_only")
            return out

    def release(self, urls, request_id=None):
        with self.lock:
            self.requests.append(("release", len(urls)))
            for u in urls:
                self.released.append((u, request_id, sum(1 for s, _, _ in self.copies if s == u)))

    def online(self, url):
        return url not in self.offline or self.staged.get(url, 0) >= self.stage_polls

    # --- the mover
    name = "fake"
    schemes = frozenset({"root"})
    pairs = frozenset({("root", "root")})
    tpc_pairs: frozenset = frozenset()

    def copy(self, src, dst, *, params, progress=None):
        with self.lock:
            self.copies.append((src, dst, self.online(src)))
            self.on_disk.add(dst)
        return TransferOutcome(100, 0.01, "0000abcd", 1, "fake")

    def stat(self, url):
        if url not in self.on_disk:
            raise TransferError(ErrorClass.SOURCE_MISSING, "no such file")
        return Entry(url, 100)

    def checksum(self, url, algorithm="adler32"):
        return "0000abcd"

    def unlink(self, url):
        self.on_disk.discard(url)

    def migrate(self):
        with self.lock:
            self.on_tape |= self.on_disk


class _NoExcl:
    def eligible(self, candidates, stats, now, file=None):
        return list(candidates), []

    def record(self, url, ok, error_class, now):
        pass


def make_spec(archive=60.0, staging=None, disk_tier=False):
    tiers = [TierSpec("T1", (TAPE,), max_active=4, archive_timeout=archive)]
    if disk_tier:
        tiers.append(TierSpec("T2", (DISK,), max_active=2))
    return CampaignSpec(name="tp", source=SourceSpec(url=SRC, bring_online=staging),
                        destinations=tuple(tiers), retries=RetrySpec(0, 0.01),
                        checksum=ChecksumSpec("adler32", "both"))


def plan(spec, n):
    conn = journal.connect(journal.journal_path(spec.name), create=True)
    planning.plan(conn, {"name": spec.name}, ((f"f{i}", f"{SRC}f{i}", 100, t.name, None)
                                             for i in range(n) for t in spec.destinations))
    return conn


def run(conn, spec, storage, **kw):
    s = scheduler.Scheduler(conn, spec, mover_factory=lambda a, b, c: storage,
                            optimizer_factory=scheduler.fixed_optimizer_factory,
                            exclusion_factory=_NoExcl, selector_name="round-robin",
                            tape_factory=lambda url: storage, tape_first_poll=0.05, **kw)
    return s.run()


def rows(conn):
    return {r["name"] + "@" + r["tier"]: dict(r) for r in conn.execute("SELECT * FROM files")}


def test_a_file_on_an_archive_tier_is_done_only_once_on_tape_asked_in_bulk(gridxfer_home):
    spec = make_spec(disk_tier=True)
    conn = plan(spec, 450)
    res = run(conn, spec, Storage())
    assert res.state == "done" and res.files_done == 900 and res.files_failed == 0
    got = rows(conn)
    tape = [r for r in got.values() if r["tier"] == "T1"]
    assert all(r["state"] == "done" and r["on_tape"] >= r["copied"] > 0 for r in tape)
    assert all(r["on_tape"] is None and r["copied"] is None
               for r in got.values() if r["tier"] == "T2")


def test_bulk_requests_hold_at_most_200_files_and_are_few(gridxfer_home):
    spec = make_spec()
    conn = plan(spec, 450)
    storage = Storage()
    res = run(conn, spec, storage)
    assert res.files_done == 450
    sizes = [n for kind, n in storage.requests if kind == "archive"]
    assert max(sizes) <= 200


def test_files_due_together_go_in_requests_of_200():
    from gridxfer.campaign.engine import tapepoll
    tape = _NeverOnTape()
    p = tapepoll.TapePoller(lambda url: tape, clock=lambda: tape.clock, first_poll=1.0)
    sizes = []
    tape.archive_status = lambda urls: sizes.append(len(urls)) or {}   # type: ignore
    for i in range(450):
        p.archive(f"{TAPE}f{i}", 10**6)
    tape.clock = 1.0
    p.poll_once()
    assert sorted(sizes) == [50, 200, 200]          # bulk: 3 requests, not 450


def test_not_on_tape_by_the_deadline_fails_archive_timeout_and_is_never_done(gridxfer_home):
    spec = make_spec(archive=1.0)
    conn = plan(spec, 5)
    storage = Storage(auto=False)
    res = run(conn, spec, storage)
    assert res.state == "partial" and res.files_done == 0 and res.files_failed == 5
    assert {(r["state"], r["error_class"], r["on_tape"]) for r in rows(conn).values()} == {
        ("failed", "archive_timeout", None)}
    assert all("not on tape" in r["error_msg"] for r in rows(conn).values())
    assert res.snapshot.failures == {"archive_timeout": 5}


def test_a_tape_source_is_copied_only_once_online_and_staging_failures_are_their_own(
        gridxfer_home):
    spec = make_spec(staging=StagingSpec(timeout=60.0, pin_lifetime=600.0), disk_tier=True)
    conn = plan(spec, 30)
    storage = Storage(offline={f"{SRC}f{i}" for i in range(30)}, missing={f"{SRC}f7"},
                      stage_polls=2)
    res = run(conn, spec, storage)
    assert res.files_failed == 2 and res.files_done == 58
    assert all(online for _, _, online in storage.copies)
    assert not any(src.endswith("/f7") for src, _, _ in storage.copies)
    assert len(storage.copies) == 58                      # each copied once, per tier
    got = rows(conn)
    assert {got[f"f7@{t}"]["error_class"] for t in ("T1", "T2")} == {"staging"}
    assert all(r["staged"] >= r["stage_requested"] for r in got.values() if r["name"] != "f7")
    assert max(n for kind, n in storage.requests if kind == "bring_online") <= 200
    assert sum(1 for kind, _ in storage.requests if kind == "bring_online") == 1
    # each source released once, after its copy to BOTH tiers (f7: failed, never pinned)
    assert sorted(u for u, _, _ in storage.released) == sorted(
        f"{SRC}f{i}" for i in range(30) if i != 7)
    assert {(rid, n) for _, rid, n in storage.released} == {("req-1", 2)}


def test_a_stopped_run_keeps_archiving_and_the_next_copies_nothing_twice(gridxfer_home):
    spec = make_spec()
    conn = plan(spec, 20)
    storage = Storage(auto=False)
    stop = threading.Event()

    def stop_when_all_archiving():
        deadline = time.time() + 20
        while time.time() < deadline and not stop.is_set():
            c = journal.connect(journal.journal_path("tp"), readonly=True)
            n = c.execute("SELECT count(*) FROM files WHERE state='archiving'").fetchone()[0]
            c.close()
            if n == 20:
                stop.set()
            time.sleep(0.02)
    threading.Thread(target=stop_when_all_archiving, daemon=True).start()
    res = run(conn, spec, storage, stop=stop)
    assert res.state == "interrupted"
    assert {r["state"] for r in rows(conn).values()} == {"archiving"}
    copies = len(storage.copies)
    assert copies == 20
    storage.migrate()
    res = run(conn, spec, storage)
    assert res.state == "done" and res.files_done == 20
    assert len(storage.copies) == copies                  # nothing copied twice
    assert all(r["on_tape"] > r["copied"] for r in rows(conn).values())


def test_recovery_keeps_a_verified_copy_on_an_archive_tier_archiving_not_done(gridxfer_home):
    spec = make_spec()
    conn = plan(spec, 1)
    fid = conn.execute("SELECT id FROM files").fetchone()[0]
    dst = f"{TAPE}f0"
    conn.execute("UPDATE files SET state='active', dst_url=?, endpoint=? WHERE id=?",
                 (dst, TAPE, fid))
    conn.execute("INSERT INTO attempts (id, file_id, tier, endpoint, dst_url, started) "
                 "VALUES (1, ?, 'T1', ?, ?, 1.0)", (fid, TAPE, dst))
    storage = Storage(auto=False)
    storage.on_disk.add(dst)                              # the dead run's copy, complete
    recovery.sweep(conn, spec, mover_factory=lambda a, b, c: storage)
    r = rows(conn)["f0@T1"]
    assert r["state"] == "archiving" and r["copied"] and r["on_tape"] is None


def test_a_stopped_run_keeps_staging_and_the_next_copies_each_file_once_online(gridxfer_home):
    spec = make_spec(staging=StagingSpec(timeout=600.0))
    conn = plan(spec, 8)
    storage = Storage(offline={f"{SRC}f{i}" for i in range(8)}, stage_polls=10**9)  # never
    stop = threading.Event()

    def stop_when_requested():
        deadline = time.time() + 20
        while time.time() < deadline and not any(k == "bring_online" for k, _ in
                                                  storage.requests):
            time.sleep(0.01)
        stop.set()
    threading.Thread(target=stop_when_requested, daemon=True).start()
    res = run(conn, spec, storage, stop=stop)
    assert res.state == "interrupted" and storage.copies == []
    got = rows(conn)
    assert {r["state"] for r in got.values()} == {"staging"}
    first = {r["stage_requested"] for r in got.values()}
    storage.stage_polls = 1                                  # the recall completes now
    res = run(conn, spec, storage)
    assert res.state == "done" and res.files_done == 8
    assert len(storage.copies) == 8 and all(online for _, _, online in storage.copies)
    assert {r["stage_requested"] for r in rows(conn).values()} == first   # the deadline kept


def test_cancel_takes_out_files_waiting_for_staging(gridxfer_home):
    import json

    from gridxfer.campaign.cancel import cancel_campaign
    from gridxfer.campaign.spec.model import spec_to_dict
    spec = make_spec(staging=StagingSpec(timeout=600.0))
    conn = plan(spec, 3)
    journal.set_meta(conn, [("spec", json.dumps(spec_to_dict(spec)))])
    conn.execute("UPDATE files SET state='staging', stage_requested=1.0")
    conn.close()
    assert cancel_campaign("tp").cancelled == 3
    conn = journal.connect(journal.journal_path("tp"))
    assert {(r["state"], r["error_class"]) for r in rows(conn).values()} == {
        ("failed", "cancelled")}


def test_a_tape_tier_whose_protocol_cannot_ask_is_refused_before_any_copy(gridxfer_home):
    from gridxfer.errors import UsageError
    spec = make_spec()
    conn = plan(spec, 2)
    storage = Storage()
    with pytest.raises(UsageError) as err:
        scheduler.Scheduler(conn, spec, mover_factory=lambda a, b, c: storage,
                            tape_factory=lambda url: None)
    assert "tier T1 (archive)" in str(err.value) and "cannot report" in str(err.value)
    assert storage.copies == []


def test_stage_requests_go_out_in_a_window_not_all_at_once(gridxfer_home, monkeypatch):
    from gridxfer.campaign.engine import tapeflow
    monkeypatch.setattr(tapeflow, "STAGE_WINDOW", 6)
    spec = make_spec(staging=StagingSpec(timeout=600.0))
    conn = plan(spec, 20)
    storage = Storage(offline={f"{SRC}f{i}" for i in range(20)}, stage_polls=2)
    res = run(conn, spec, storage)
    assert res.state == "done" and res.files_done == 20 and len(storage.copies) == 20
    assert sorted(storage.staged) == sorted(f"{SRC}f{i}" for i in range(20))
    sizes = [n for kind, n in storage.requests if kind == "bring_online"]
    assert sum(sizes) == 20 and len(sizes) > 1, sizes
    assert 1 < storage.peak_offline <= 6                # never more than the window waiting


def test_the_live_view_shows_files_waiting_for_tape(gridxfer_home):
    from gridxfer.cli.progress import health_lines
    spec = make_spec()
    conn = plan(spec, 4)
    storage = Storage(auto=False)
    seen = []
    stop = threading.Event()

    def observe(snap):
        seen.append((snap.files_archiving, snap.tape_oldest,
                     [line for line, _ in health_lines(snap)]))
        if snap.files_archiving == 4 and snap.tape_oldest is not None and snap.tape_oldest > 0:
            stop.set()
    run(conn, spec, storage, stop=stop, observers=[observe])
    n, oldest, lines = seen[-1]
    assert n == 4 and oldest > 0
    assert any(line.startswith("tape: 4 files copied, waiting for tape, the oldest for ")
               for line in lines), lines


class _NeverOnTape:
    def __init__(self):
        self.polls: list[float] = []
        self.clock = 0.0

    def archive_status(self, urls):
        self.polls.append(self.clock)
        return {u: State(u, "disk_only") for u in urls}


def _poll_gaps(n_files, seconds, monkeypatch, budget=None):
    from gridxfer.campaign.engine import tapepoll
    if budget is not None:
        monkeypatch.setattr(tapepoll, "POLL_BUDGET", budget)
    tape = _NeverOnTape()
    p = tapepoll.TapePoller(lambda url: tape, clock=lambda: tape.clock, first_poll=1.0)
    for i in range(n_files):
        p.archive(f"{TAPE}f{i}", 10**6)
    while tape.clock < seconds:
        tape.clock += 0.25
        p.poll_once()
    return [b - a for a, b in itertools.pairwise(tape.polls)]


def test_a_small_backlog_is_asked_every_few_seconds_a_large_one_within_a_budget(monkeypatch):
    from gridxfer.campaign.engine import tapepoll
    gaps = _poll_gaps(10, 120, monkeypatch)
    assert max(gaps) <= tapepoll.MIN_GAP                  # seen on tape soon after it is
    gaps = _poll_gaps(10, 300, monkeypatch, budget=0.5)   # 10 files at 0.5/s: every 20 s
    assert gaps[:5] == [2.0, 4.0, 8.0, 16.0, 20.0] and max(gaps) == 20.0
    assert len(gaps) < 25                                 # not one poll per round


@pytest.mark.parametrize("ec, refused", [(ErrorClass.OTHER, True), (ErrorClass.PERMISSION, True),
                                         (ErrorClass.CONNECTION, False)])
def test_a_server_that_does_not_answer_tape_queries_is_refused_before_any_copy(
        gridxfer_home, ec, refused):
    from gridxfer.errors import UsageError

    class Disk(Storage):
        def archive_status(self, urls):
            raise TransferError(ec, "[3000] Prepare requestid owned by an unknown server")
    spec = make_spec()
    conn = plan(spec, 2)
    storage = Disk()
    make = lambda: scheduler.Scheduler(conn, spec, mover_factory=lambda a, b, c: storage,  # noqa: E731
                                       tape_factory=lambda url: storage)
    if refused:
        with pytest.raises(UsageError) as err:
            make()
        assert "does not answer tape queries, is it tape-backed?" in str(err.value)
        assert "\n" not in str(err.value)
    else:
        make()                              # down now: the poller will ask again
    assert storage.copies == []


def test_a_second_ctrl_c_does_not_wait_for_a_tape_request_in_flight(gridxfer_home):
    """Under ``hurry`` the scheduler closes the tape flow with 1 s: close(timeout) returns
    while a request to a storage that does not answer is still in flight."""
    inside, release = threading.Event(), threading.Event()

    class Hung(Storage):
        def archive_status(self, urls):
            if urls[0].endswith("gridxfer-tape-probe"):
                return {}
            inside.set()
            release.wait(30)
            return super().archive_status(urls)
    spec = make_spec()
    conn = plan(spec, 1)
    tape = Hung()
    s = scheduler.Scheduler(conn, spec, mover_factory=lambda a, b, c: tape,
                            tape_factory=lambda url: tape, tape_first_poll=0.0)
    s.tape.load(time.time())
    s.tape.copied(1, "T1", f"{TAPE}f0", 100, time.time())
    assert inside.wait(10)
    s.tape.close(0.05)
    poller = s.tape.poller
    assert poller is not None and poller._thread is not None and poller._thread.is_alive()
    release.set()
    poller._thread.join(10)
