"""Scheduler logic with a test mover implementing the Mover seam (pure logic; the real
movers are exercised by tests/integration/test_campaign_*.py on real servers)."""
from __future__ import annotations

import threading
import types
import time

import pytest

from gridxfer.campaign import runner
from gridxfer.campaign.journal import planning, store as journal
from gridxfer.campaign.policy import optimizer as optimizer_mod
from gridxfer.campaign.engine import scheduler
from gridxfer.campaign.engine import slots
from gridxfer.campaign.engine import watchdog
from gridxfer.campaign.engine import workers
from gridxfer.campaign.policy.selection import Exclusion
from gridxfer.campaign.spec.schema import (CampaignSpec, ChecksumSpec, RetrySpec, SourceSpec,
                                    TierSpec)
from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import Entry, TransferOutcome

POOL = ("root://a.invalid:1//d/", "root://b.invalid:1//d/")


class FakeMover:
    """Scripted outcomes per (name, endpoint); records calls and concurrency."""

    name = "fake"
    schemes = frozenset({"root"})
    pairs = frozenset({("file", "root")})
    tpc_pairs: frozenset[tuple[str, str]] = frozenset()

    def __init__(self, script=None, delay=0.0, block: threading.Event | None = None):
        self.script = script or {}          # callable(src, dst, n) -> None | ErrorClass
        self.delay, self.block = delay, block
        self.calls: list[tuple[str, str]] = []
        self.unlinked: list[str] = []
        self.active = self.peak = 0
        self.lock = threading.Lock()
        self.params = []
        self.files: dict[str, tuple[int, str]] = {}   # dst -> (size, adler32)

    def copy(self, src, dst, *, params, progress=None):
        with self.lock:
            self.calls.append((src, dst))
            self.params.append(params)
            n = sum(1 for s, _ in self.calls if s == src)
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            if self.block is not None:
                while not self.block.is_set():
                    if params.cancel is not None and params.cancel.wait(0.01):
                        raise TransferError(ErrorClass.CANCELLED, "cancelled")
            if self.delay:
                time.sleep(self.delay)
            rule = self.script.get("rule")
            verdict = rule(src, dst, n) if rule else None
            if isinstance(verdict, ErrorClass):
                raise TransferError(verdict, f"scripted {verdict.value}")
            if progress:
                progress(100, 100)
            self.files[dst] = (100, verdict or "0000abcd")
            return TransferOutcome(100, 0.01, verdict or "0000abcd", params.streams, "fake")
        finally:
            with self.lock:
                self.active -= 1

    def unlink(self, url):
        self.unlinked.append(url)
        self.files.pop(url, None)

    def stat(self, url):
        if url not in self.files:
            raise TransferError(ErrorClass.SOURCE_MISSING, "no such file")
        return Entry(url, self.files[url][0])

    def listdir(self, url):
        return [Entry(u, v[0]) for u, v in self.files.items()
                if u.rpartition("/")[0] + "/" == url]

    def checksum(self, url, algorithm="adler32"):
        return self.files[url][1] if url in self.files else "0000abcd"


def make_spec(n_tiers=1, max_active=3, retries=2, pool=POOL, **kw):
    tiers = tuple(TierSpec(f"T{i}", pool if i == 0 else ("root://c.invalid:1//d/",), streams=2,
                           max_active=max_active) for i in range(n_tiers))
    return CampaignSpec(name="s1", source=SourceSpec(url="root://src.invalid:1//s/"),
                        destinations=tiers,
                        retries=RetrySpec(retries, 0.01), checksum=ChecksumSpec("adler32", "both"),
                        **kw)


def plan(spec, n=10, expected=None, size=100):
    conn = journal.connect(journal.journal_path(spec.name), create=True)
    planning.plan(conn, {"name": spec.name},
                 ((f"f{i}", f"root://src.invalid:1//s/f{i}", size, t.name,
                                              expected) for i in range(n)
                                             for t in spec.destinations))
    return conn


def run(conn, spec, mover, **kw):
    kw.setdefault("optimizer_factory", scheduler.fixed_optimizer_factory)
    kw.setdefault("exclusion_factory", _NoExcl)       # no space probes of made-up hosts
    kw.setdefault("selector_name", "round-robin")
    s = scheduler.Scheduler(conn, spec, mover_factory=lambda a, b, c: mover, **kw)
    return s, s.run()


def states(conn):
    return dict(conn.execute("SELECT state, count(*) FROM files GROUP BY state").fetchall())


def test_all_done_round_robin_and_cap(gridxfer_home):
    spec = make_spec(n_tiers=2, max_active=3)
    conn = plan(spec, 30)
    mover = FakeMover(delay=0.01)
    _, res = run(conn, spec, mover)
    assert res.state == "done" and res.files_done == 60 and res.files_failed == 0
    assert states(conn) == {"done": 60}
    assert 1 < mover.peak <= 6                      # two links x max_active 3
    t0 = [d for s, d in mover.calls if "//a.invalid:1" in d or "//b.invalid:1" in d]
    assert abs(sum("//a.invalid:1" in d for d in t0) - sum("//b.invalid:1" in d for d in t0)) <= 1
    assert all(p.streams == 2 and p.checksum == "adler32" for p in mover.params)
    ok = conn.execute("SELECT count(*) FROM attempts WHERE status='ok' AND rate > 0").fetchone()[0]
    assert ok == 60
    assert conn.execute("SELECT count(*) FROM files WHERE dst_url LIKE 'root://_.invalid:1//d/f%'"
                        ).fetchone()[0] == 60
    assert journal.get_meta(conn)["state"] == "done"


def test_retry_classes(gridxfer_home):
    spec = make_spec(retries=2)
    conn = plan(spec, 4)

    def rule(src, dst, n):
        if src.endswith("f0"):
            return ErrorClass.SOURCE_MISSING          # never retried
        if src.endswith("f1"):
            return ErrorClass.CONNECTION if n < 3 else None   # retried, third try works
        if src.endswith("f2"):
            return ErrorClass.TIMEOUT                 # retried until max, then failed
        return None

    mover = FakeMover({"rule": rule})
    _, res = run(conn, spec, mover, exclusion_factory=lambda: _NoExcl())
    assert res.state == "partial" and res.files_done == 2 and res.files_failed == 2
    got = {r["name"]: (r["state"], r["attempts"], r["error_class"]) for r in conn.execute(
        "SELECT name, state, attempts, error_class FROM files")}
    assert got == {"f0": ("failed", 1, "source_missing"), "f1": ("done", 3, None),
                   "f2": ("failed", 3, "timeout"), "f3": ("done", 1, None)}
    assert conn.execute("SELECT count(*) FROM attempts WHERE status='failed'").fetchone()[0] == 6


def test_no_space_goes_elsewhere(gridxfer_home):
    spec = make_spec(retries=1)
    conn = plan(spec, 6)
    mover = FakeMover({"rule": lambda s, d, n: ErrorClass.NO_SPACE if "//a.invalid:1" in d
                       else None})
    _, res = run(conn, spec, mover, exclusion_factory=lambda: _NoExcl())
    assert res.files_done == 6 and res.files_failed == 0
    assert conn.execute("SELECT count(*) FROM files WHERE endpoint = ?", (POOL[1],)
                        ).fetchone()[0] == 6


def test_checksum_mismatch_deletes_and_retries(gridxfer_home):
    spec = make_spec(retries=1)
    conn = plan(spec, 2, expected="12345678")
    mover = FakeMover({"rule": lambda s, d, n: "12345678" if n == 2 else "deadbeef"})
    _, res = run(conn, spec, mover, exclusion_factory=lambda: _NoExcl())
    assert res.files_done == 2
    assert len(mover.unlinked) == 2                   # the bad first copies were deleted
    assert {r[0] for r in conn.execute("SELECT error_class FROM attempts WHERE status='failed'")} \
        == {"checksum"}
    assert all(p.expected_checksum == "12345678" for p in mover.params)


def test_stop_leaves_consistent_journal_and_resume_finishes(gridxfer_home):
    spec = make_spec(max_active=2)
    conn = plan(spec, 6)
    block = threading.Event()
    mover = FakeMover(block=block)
    stop = threading.Event()
    s = scheduler.Scheduler(conn, spec, mover_factory=lambda a, b, c: mover, stop=stop,
                            optimizer_factory=scheduler.fixed_optimizer_factory,
                            exclusion_factory=_NoExcl)
    threading.Timer(0.3, stop.set).start()
    res = s.run()
    assert res.state == "interrupted"
    assert states(conn) == {"pending": 6}
    assert conn.execute("SELECT count(*) FROM attempts WHERE status='cancelled'").fetchone()[0] == 2
    assert conn.execute("SELECT max(attempts) FROM files").fetchone()[0] == 0
    assert journal.get_meta(conn)["state"] == "interrupted"
    block.set()
    _, res = run(conn, spec, mover)
    assert res.state == "done" and states(conn) == {"done": 6}


def test_recover_after_kill(gridxfer_home):
    spec = make_spec()
    conn = plan(spec, 3)
    mover = FakeMover()
    mover.files["root://a.invalid:1//d/f0"] = (100, "0000abcd")       # finished before the kill
    mover.files["root://b.invalid:1//d/f1"] = (50, "0000abcd")        # partial at the final name
    mover.files["root://b.invalid:1//d/.f1.gxpart-0123abcd"] = (20, "0")   # a mover's temp file
    mover.files["root://b.invalid:1//d/.f10.gxpart-0123abcd"] = (20, "0")  # another file's: kept
    mover.files["root://b.invalid:1//d/.f1.part"] = (30, "0")           # the journalled temp
    now = time.time()
    conn.execute("UPDATE files SET state='active', attempts=1 WHERE id IN (1, 2, 3)")
    conn.executemany("INSERT INTO attempts (id, file_id, tier, endpoint, dst_url, started, tmp_url)"
                     " VALUES (?, ?, 'T0', ?, ?, ?, ?)",
                     [(1, 1, POOL[0], POOL[0] + "f0", now, None),
                      (2, 2, POOL[1], POOL[1] + "f1", now, POOL[1] + ".f1.part")])
    n = runner.recover(conn, spec, lambda a, b, c: mover)
    assert n == 3                                          # two attempts + one orphan file
    assert dict(conn.execute("SELECT name, state FROM files").fetchall()) == {
        "f0": "done", "f1": "pending", "f2": "pending"}
    assert set(mover.unlinked) == {POOL[1] + ".f1.part", POOL[1] + ".f1.gxpart-0123abcd",
                                   POOL[1] + "f1"}
    assert conn.execute("SELECT count(*) FROM attempts WHERE status='active'").fetchone()[0] == 0


def test_exclusions_and_optimizer_are_journalled(gridxfer_home):
    spec = make_spec()
    conn = plan(spec, 4)

    class ExcludeA(_NoExcl):
        def eligible(self, candidates, stats, now, file=None):
            return [c for c in candidates if "//a.invalid:1" not in c], [
                Exclusion(POOL[0], "circuit open: test", now + 60)]

    class Two:
        def __init__(self, lo, hi):
            pass

        def update(self, now, link):
            from gridxfer.campaign.policy.optimizer import Decision
            return Decision(2, "two because the test says so")

    _, res = run(conn, spec, FakeMover(), exclusion_factory=ExcludeA,
                 optimizer_factory=lambda t: Two(1, 3))
    assert res.files_done == 4
    assert conn.execute("SELECT count(*) FROM files WHERE endpoint=?",
                        (POOL[0],)).fetchone()[0] == 0
    ex = list(journal.last_events(conn, "excluded"))
    assert ex and ex[0]["url"] == POOL[0] and ex[0]["reason"] == "circuit open: test"
    opt = list(journal.last_events(conn, "optimizer"))
    assert opt[0]["active"] == 2 and opt[0]["reason"] == "two because the test says so"


def test_dispatch_many_with_noop_mover(gridxfer_home):
    """5000 files through a no-op mover all end done, each once. The rate (issue 7's
    >= 1000 files/s) is a measurement: `python -m bench.scale` (dispatch phase)."""
    spec = make_spec(max_active=8)
    conn = plan(spec, 5000)

    class Noop:
        def copy(self, src, dst, *, params, progress=None):
            return TransferOutcome(1, 0.001, None, 1, "noop")

    _, res = run(conn, spec, Noop())
    assert res.files_done == 5000
    assert [tuple(r) for r in conn.execute(
        "SELECT state, count(*) FROM files GROUP BY state")] == [("done", 5000)]


class _NoExcl:
    def eligible(self, candidates, stats, now, file=None):
        return list(candidates), []

    def record(self, url, ok, error_class, now):
        pass


@pytest.fixture(autouse=True)
def _fast_backoff(monkeypatch):
    monkeypatch.setattr(scheduler, "STOP_GRACE", 5.0)


def test_hung_mover_is_cancelled_then_abandoned(gridxfer_home, monkeypatch):
    monkeypatch.setattr(watchdog, "ABANDON_AFTER", 0.3)
    spec = make_spec(max_active=2, retries=0, timeout=0.1)
    conn = plan(spec, 3)
    release = threading.Event()

    class Hang(FakeMover):
        def copy(self, src, dst, *, params, progress=None):
            if src.endswith("f0"):           # ignores cancel entirely
                release.wait(10)
                raise TransferError(ErrorClass.OTHER, "late")
            if src.endswith("f1"):           # honours cancel
                params.cancel.wait(10)
                raise TransferError(ErrorClass.CANCELLED, "cancelled")
            return super().copy(src, dst, params=params, progress=progress)

    monkeypatch.setattr(scheduler.Scheduler, "_watchdog",
                        _fast_watchdog(scheduler.Scheduler._watchdog))
    t = time.monotonic()
    _, res = run(conn, spec, Hang(), exclusion_factory=lambda: _NoExcl())
    release.set()
    assert time.monotonic() - t < 9          # abandoned: f0 alone would hold the run 10 s
    got = {r["name"]: (r["state"], r["error_class"]) for r in conn.execute(
        "SELECT name, state, error_class FROM files")}
    assert got == {"f0": ("failed", "timeout"), "f1": ("failed", "timeout"), "f2": ("done", None)}


def _fast_watchdog(orig):
    """The backstop is timeout + 10 s; shift the clock so the test needs no 10 s wait."""
    def wd(self, now):
        return orig(self, now + 10.0)
    return wd


def test_short_transfers_are_dispatched_ahead_but_never_run_beyond_the_cap(gridxfer_home):
    """Small files: jobs wait at the link's gate so a worker never idles on the
    dispatcher, but at most max_active transfers run at once."""
    spec = make_spec(max_active=5)                  # 5 workers, but the optimizer says 3

    class Three:
        def update(self, now, sample):
            return optimizer_mod.Decision(3, "test")

    mover = FakeMover(delay=0.002)
    res, dispatched_peak = _run_counting_dispatch(plan(spec, 300), spec, mover,
                                                  lambda tier: Three())
    assert res.files_done == 300
    assert mover.peak <= 3                          # the gate holds the cap
    assert dispatched_peak > 3                      # ... while jobs were handed out ahead
    assert dispatched_peak <= 2 * 3 * slots.MAX_BUNDLE   # two bundles per slot at most


def test_short_transfers_go_to_workers_in_bundles_per_endpoint(gridxfer_home, monkeypatch):
    """One queue hand-off per bundle, not per file; a bundle never mixes endpoints, so a
    slow server holds up only its own files."""
    spec = make_spec(max_active=4)
    handoffs, mixed = [], []
    submit = workers.WorkerPool.submit_bundle

    def spy(self, jobs):
        handoffs.append(len(jobs))
        if len({j.endpoint for j in jobs}) > 1:
            mixed.append(jobs)
        submit(self, jobs)

    monkeypatch.setattr(workers.WorkerPool, "submit_bundle", spy)
    mover = FakeMover(delay=0.002)
    res, _ = _run_counting_dispatch(plan(spec, 400), spec, mover,
                                    scheduler.fixed_optimizer_factory)
    assert res.files_done == 400 and mover.peak <= 4
    assert sum(handoffs) == 400 and not mixed
    assert len(handoffs) < 400 / 3, handoffs       # bundles of several files
    assert max(handoffs) <= slots.MAX_BUNDLE


def test_bundle_size_follows_the_transfer_time():
    s = slots.LinkSlots(["T"])
    assert s.bundle("T") == 1                       # nothing measured: QUICK, no bundles
    for _ in range(40):
        s.finished("T", 0.003)
    assert s.bundle("T") == int(slots.BUNDLE_SECONDS / s._typical["T"])
    for _ in range(40):
        s.finished("T", 0.0001)
    assert s.bundle("T") == slots.MAX_BUNDLE
    for _ in range(40):
        s.finished("T", slots.QUICK * 2)
    assert s.bundle("T") == 1


def _run_counting_dispatch(conn, spec, mover, optimizer_factory):
    """Run; also return the most transfers ever dispatched (running or waiting) at once."""
    s = scheduler.Scheduler(conn, spec, mover_factory=lambda a, b, c: mover,
                            optimizer_factory=optimizer_factory,
                            exclusion_factory=_NoExcl, selector_name="round-robin")
    peak = [0]
    start = s.acct.start

    def counting_start(tier, ep, size, now):
        flight = start(tier, ep, size, now)
        peak[0] = max(peak[0], s.acct.active(tier))
        return flight

    s.acct.start = counting_start
    return s.run(), peak[0]


def test_long_transfers_are_not_dispatched_ahead(gridxfer_home, monkeypatch):
    monkeypatch.setattr(slots, "AHEAD", 0.05)       # long transfers, scaled down
    spec = make_spec(max_active=2)
    mover = FakeMover(delay=0.1)
    res, peak = _run_counting_dispatch(plan(spec, 6), spec, mover,
                                       scheduler.fixed_optimizer_factory)
    assert res.files_done == 6
    assert peak <= 2 and mover.peak <= 2


def test_transfers_shorter_than_ahead_are_handed_out_ahead_one_by_one(gridxfer_home,
                                                                      monkeypatch):
    """A small file over a long link (longer than QUICK, shorter than AHEAD: ~65 ms over
    20 ms) is dispatched ahead, not in bundles, and the gate still holds the cap."""
    monkeypatch.setattr(slots, "AHEAD", 10.0)       # 0.1 s transfers count as short
    spec = make_spec(max_active=2)
    bundles: list[int] = []
    submit = workers.WorkerPool.submit_bundle
    monkeypatch.setattr(workers.WorkerPool, "submit_bundle",
                        lambda self, jobs: (bundles.append(len(jobs)), submit(self, jobs)))
    mover = FakeMover(delay=slots.QUICK * 2)
    res, peak = _run_counting_dispatch(plan(spec, 8), spec, mover,
                                       scheduler.fixed_optimizer_factory)
    assert res.files_done == 8
    assert mover.peak <= 2 < peak <= 4              # ahead: two per slot at most
    assert set(bundles) == {1}


def test_verification_frees_the_link_slot(gridxfer_home, monkeypatch):
    """Once a mover says its bytes are in place (data_done), the next transfer starts
    while the first is still verifying; transfers moving data never exceed the cap."""
    monkeypatch.setattr(slots, "RELEASE_AFTER", 0.1)     # long transfers, scaled down
    spec = make_spec(max_active=2)
    conn = plan(spec, 8)
    lock = threading.Lock()
    moving = [0, 0]                 # now, peak
    overlap = [0]                   # peak of transfers alive (moving + verifying)
    alive = [0]

    class Verifying:
        def copy(self, src, dst, *, params, progress=None):
            with lock:
                moving[0] += 1
                alive[0] += 1
                moving[1] = max(moving[1], moving[0])
                overlap[0] = max(overlap[0], alive[0])
            time.sleep(0.06)        # bytes
            with lock:
                moving[0] -= 1
            params.data_done()
            time.sleep(0.2)         # a slow server checksum
            with lock:
                alive[0] -= 1
            return TransferOutcome(100, 0.26, "0000abcd", 1, "fake")

    _, res = run(conn, spec, Verifying())
    assert res.files_done == 8
    assert moving[1] <= 2                       # the cap holds for data movement
    assert overlap[0] > 2                       # verification overlapped new transfers


def test_spare_workers_are_no_more_than_the_files_left(gridxfer_home, monkeypatch):
    """Verifications hold workers, so spare ones start, each opening its own sessions to
    the pool first (a stat per endpoint: a GSI login on GridFTP). 5 files under a ceiling
    of 64 start at most 5, not 64 (session 39: 128 logins made 5 gsiftp copies take 20 s)."""
    monkeypatch.setattr(slots, "RELEASE_AFTER", 0.05)
    spec = make_spec(max_active=64)
    conn = plan(spec, 5)
    lock = threading.Lock()
    warmed: list[str] = []

    class Verifying:
        def copy(self, src, dst, *, params, progress=None):
            time.sleep(0.1)         # bytes, longer than RELEASE_AFTER
            params.data_done()
            time.sleep(0.2)         # a slow server checksum
            return TransferOutcome(100, 0.3, "0000abcd", 1, "fake")

        def stat(self, url):        # Work.warm: a new worker's session, per pool endpoint
            with lock:
                warmed.append(url)
            return Entry(url, 0)

    _, res = run(conn, spec, Verifying())
    assert res.files_done == 5
    assert warmed and len(warmed) <= 5 * len(POOL), len(warmed)


def test_the_first_long_transfers_free_their_slots_too(gridxfer_home, monkeypatch):
    """Nothing is measured at the start (the link's typical transfer is QUICK): a copy
    that has moved data for RELEASE_AFTER still frees its slot at data_done, so the third
    file starts while the first two verify, not after them."""
    monkeypatch.setattr(slots, "RELEASE_AFTER", 0.1)
    spec = make_spec(max_active=2)
    conn = plan(spec, 4)
    lock = threading.Lock()
    starts: list[float] = []
    returns: list[float] = []
    third = threading.Event()

    class Verifying:
        def copy(self, src, dst, *, params, progress=None):
            with lock:
                starts.append(time.monotonic())
                if len(starts) == 3:
                    third.set()
            time.sleep(0.15)        # bytes, longer than RELEASE_AFTER
            params.data_done()
            # a slow server checksum: it lasts until a third copy runs (10 s at most), so
            # the third starts before any return only if data_done freed a slot; no
            # scheduling latency of a loaded machine can decide it
            third.wait(10)
            with lock:
                returns.append(time.monotonic())
            return TransferOutcome(100, 0.55, "0000abcd", 1, "fake")

    _, res = run(conn, spec, Verifying())
    assert res.files_done == 4
    starts.sort()
    assert starts[2] < min(returns), (starts, returns)


def test_spare_workers_are_wanted_before_the_first_long_transfer_ends(monkeypatch):
    monkeypatch.setattr(slots, "RELEASE_AFTER", 3600.0)     # "not long yet", whatever the load
    s = slots.LinkSlots(["LONG", "SHORT"])
    release = threading.Event()
    threads = []
    for tier in ("LONG", "SHORT"):
        s.set_cap(tier, 2)
        job = types.SimpleNamespace(tier=tier, cancel=threading.Event(), slot=None)
        th = threading.Thread(target=s.run, args=(job, lambda done: release.wait(5), lambda: None))
        th.start()
        threads.append(th)
    try:
        s.finished("SHORT", 0.001)          # a SHORT transfer has ended: its copies are quick
        assert not s.wants_spare_workers("LONG")        # not long yet
        monkeypatch.setattr(slots, "RELEASE_AFTER", 0.05)
        deadline = time.monotonic() + 10                # the threads run for RELEASE_AFTER
        while not (wanted := s.wants_spare_workers("LONG")) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert wanted                                   # running for RELEASE_AFTER, none ended
        assert not s.wants_spare_workers("LONG")        # once
        assert not s.wants_spare_workers("SHORT")
    finally:
        release.set()
        for th in threads:
            th.join()


def test_live_view_counts_jobs_waiting_ahead_apart_from_running_ones(gridxfer_home):
    spec = make_spec(max_active=2)
    conn = plan(spec, 4)
    s = scheduler.Scheduler(conn, spec, mover_factory=lambda a, b, c: FakeMover(),
                            optimizer_factory=scheduler.fixed_optimizer_factory,
                            exclusion_factory=_NoExcl, selector_name="round-robin")
    now = time.time()
    for _ in range(3):                              # three handed out ...
        s.acct.start("T0", POOL[0], 100, now)
    s.acct.set_cap("T0", 2, "test")
    s._slots.set_cap("T0", 2)
    assert s._slots._gates["T0"].enter(threading.Event())  # ... one of them running
    link = next(link for link in s._slots.annotate(s.acct.snapshot(now)).links if link.tier == "T0")
    assert (link.active, link.ahead) == (3, 2)
    from gridxfer.cli.progress import render
    from rich.console import Console
    con = Console(width=200, record=True)
    con.print(render(s._slots.annotate(s.acct.snapshot(now)), "c"))
    assert "1/2 +2" in con.export_text()


def _run_with_f0_stuck(conn, spec, monkeypatch) -> float:
    """Run the campaign with a mover stuck for good in f0 (it ignores cancel) and the
    watchdog's clock shifted so abandoning takes ~1 s; seconds the run took."""
    monkeypatch.setattr(watchdog, "ABANDON_AFTER", 0.3)
    monkeypatch.setattr(scheduler.Scheduler, "_watchdog",
                        _fast_watchdog(scheduler.Scheduler._watchdog))
    release = threading.Event()

    class Stuck(FakeMover):
        def copy(self, src, dst, *, params, progress=None):
            if src.endswith("f0"):
                release.wait(20)
                raise TransferError(ErrorClass.OTHER, "late")
            return super().copy(src, dst, params=params, progress=progress)

    t = time.monotonic()
    try:
        run(conn, spec, Stuck(), exclusion_factory=lambda: _NoExcl(),
            optimizer_factory=scheduler.fixed_optimizer_factory)
    finally:
        release.set()
    return time.monotonic() - t


def test_an_abandoned_transfer_gives_its_link_slot_back(gridxfer_home, monkeypatch):
    """A mover that never returns (ignores cancel) is abandoned by the watchdog; its slot
    must come back, or a link with one slot would be dead for the rest of the campaign.
    The files queued behind it were never tried: they do not fail with it."""
    spec = make_spec(max_active=1, retries=0, timeout=0.1)
    conn = plan(spec, 4)
    assert _run_with_f0_stuck(conn, spec, monkeypatch) < 8
    got = {r["name"]: (r["state"], r["error_class"]) for r in conn.execute(
        "SELECT name, state, error_class FROM files")}
    assert got == {"f0": ("failed", "timeout"), "f1": ("done", None), "f2": ("done", None),
                   "f3": ("done", None)}


def test_files_stranded_behind_an_abandoned_transfer_are_requeued_not_failed(gridxfer_home,
                                                                             monkeypatch):
    """Bundles of 3 (forced): f0 hangs for good, f1 and f2 wait behind it in its worker.
    When f0 is abandoned they go back to the queue without using up an attempt (retries
    0: had they counted, they would fail) and are copied by the replacement worker."""
    monkeypatch.setattr(slots.LinkSlots, "bundle", lambda self, tier: 3)
    monkeypatch.setattr(slots.LinkSlots, "free",
                        lambda self, tier, cap, active: max(0, 6 * cap - active))
    spec = make_spec(max_active=1, retries=0, timeout=0.1, pool=POOL[:1])   # one endpoint
    conn = plan(spec, 4)
    assert _run_with_f0_stuck(conn, spec, monkeypatch) < 8
    got = {r["name"]: (r["state"], r["attempts"]) for r in conn.execute(
        "SELECT name, state, attempts FROM files")}
    assert got == {"f0": ("failed", 1), "f1": ("done", 1), "f2": ("done", 1), "f3": ("done", 1)}
    requeued = sorted(r[0] for r in conn.execute(
        "SELECT f.name FROM attempts a JOIN files f ON f.id = a.file_id "
        "WHERE a.status = 'cancelled' AND a.error_msg LIKE 'requeued%'"))
    assert requeued == ["f1", "f2"]
