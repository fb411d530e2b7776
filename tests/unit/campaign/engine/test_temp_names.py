"""Temporary names: chosen by the scheduler, journalled before the mover runs, written to
exactly by the mover, kept in the journal while they may exist, and swept by resume."""
from __future__ import annotations

import sqlite3
import threading
import time

from gridxfer.campaign.journal import planning, store as journal
from gridxfer.campaign.engine import recovery
from gridxfer.campaign.engine import scheduler
from gridxfer.campaign.spec.schema import (CampaignSpec, ChecksumSpec, RetrySpec, SourceSpec,
                                    TierSpec)
from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import Entry, TransferOutcome
from gridxfer.movers.urls import TEMP_MARK

POOL = ("root://a.invalid:1//d/",)


class TempMover:
    """Writes its temporary name first (as verified_copy does), then renames it."""

    def __init__(self, block: threading.Event | None = None, fail: bool = False,
                 db=None) -> None:
        self.block, self.fail, self.db = block, fail, db
        self.files: dict[str, int] = {}
        self.seen: list[tuple[str, object]] = []        # (temp name, journalled tmp_url)
        self.lock = threading.Lock()
        self.down: set[str] = set()
        self.refused = 0

    def copy(self, src, dst, *, params, progress=None):
        tmp = params.temp_url
        journalled = None
        if self.db is not None:         # what another process reads in the journal now
            c = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
            journalled = c.execute("SELECT tmp_url FROM attempts WHERE dst_url = ? AND "
                                   "status = 'active'", (dst,)).fetchone()
            c.close()
        with self.lock:
            self.seen.append((tmp, journalled and journalled[0]))
            self.files[tmp] = 50
        while self.block is not None and not self.block.is_set():
            time.sleep(0.005)           # a transfer that ignores its cancel flag
        if self.fail:
            raise TransferError(ErrorClass.CONNECTION, "reset (temp left behind)")
        with self.lock:
            self.files[dst] = self.files.pop(tmp) * 2
        return TransferOutcome(100, 0.01, None, 1, "temp")

    def _check(self, url):
        if any(url.startswith(d) for d in self.down):
            self.refused += 1
            raise TransferError(ErrorClass.CONNECTION, "connection refused")

    def stat(self, url):
        self._check(url)
        if url not in self.files:
            raise TransferError(ErrorClass.SOURCE_MISSING, "no such file")
        return Entry(url, self.files[url])

    def unlink(self, url):
        self._check(url)
        with self.lock:
            self.files.pop(url, None)

    def listdir(self, url):
        self._check(url)
        return [Entry(u, n) for u, n in self.files.items() if u.rpartition("/")[0] + "/" == url]


def make(n=4, max_active=2):
    spec = CampaignSpec(name="t1", source=SourceSpec(url="root://src.invalid:1//s/"),
                        destinations=(TierSpec("T0", POOL, max_active=max_active),),
                        retries=RetrySpec(0, 0.01), checksum=ChecksumSpec(None, "none"))
    path = journal.journal_path(spec.name)
    conn = journal.connect(path, create=True)
    planning.plan(conn, {"name": spec.name}, ((f"f{i}", f"root://src.invalid:1//s/f{i}", 100,
                                              "T0", None) for i in range(n)))
    return spec, conn, path


class _NoExcl:
    def eligible(self, candidates, stats, now, file=None):
        return list(candidates), []

    def record(self, url, ok, error_class, now):
        pass


def sched(conn, spec, mover, **kw):
    return scheduler.Scheduler(conn, spec, mover_factory=lambda a, b, c: mover,
                               optimizer_factory=scheduler.fixed_optimizer_factory,
                               exclusion_factory=_NoExcl, selector_name="round-robin", **kw)


def test_the_mover_writes_the_name_journalled_before_it_ran(gridxfer_home):
    spec, conn, path = make(6)
    mover = TempMover(db=path)
    res = sched(conn, spec, mover).run()
    assert res.state == "done"
    assert len(mover.seen) == 6
    for tmp, journalled in mover.seen:
        assert tmp and TEMP_MARK in tmp and tmp == journalled
    assert len({t for t, _ in mover.seen}) == 6                     # one name per attempt
    # renamed into place: nothing left to remove, nothing recorded as if it were
    left = conn.execute("SELECT count(*) FROM attempts WHERE tmp_url IS NOT NULL").fetchone()[0]
    assert left == 0


def test_failed_attempts_keep_their_temp_until_resume_sweeps_it(gridxfer_home):
    spec, conn, _ = make(3)
    mover = TempMover(fail=True)
    assert sched(conn, spec, mover).run().files_failed == 3
    left = journal.leftover_temps(conn)
    assert sorted(r["tmp_url"] for r in left) == sorted(t for t, _ in mover.seen)
    mover.down = {POOL[0]}                              # endpoint down: kept for later
    swept = recovery.sweep(conn, spec, lambda a, b, c: mover)
    assert (swept.removed, swept.kept, mover.refused) == (0, 3, 1)   # asked once only
    assert len(journal.leftover_temps(conn)) == 3
    mover.down = set()
    swept = recovery.sweep(conn, spec, lambda a, b, c: mover)
    assert (swept.recovered, swept.removed, swept.kept) == (0, 3, 0)
    assert not [u for u in mover.files if TEMP_MARK in u]
    assert journal.leftover_temps(conn) == []


def test_second_ctrl_c_leaves_transfers_in_a_mover_for_recovery(gridxfer_home):
    """Stuck in the mover at a second Ctrl-C: attempt and file stay 'active' (the worker
    may still write, or finish, after the run returned); recovery settles them."""
    spec, conn, _ = make(6, max_active=2)
    block = threading.Event()
    mover = TempMover(block=block)
    s = sched(conn, spec, mover, stop_grace=30)

    def ctrl_c_twice():
        while len(mover.seen) < 2:
            time.sleep(0.005)
        s.stop.set()
        s.hurry.set()

    threading.Thread(target=ctrl_c_twice, daemon=True).start()
    res = s.run()
    assert res.state == "interrupted"
    active = conn.execute("SELECT tmp_url FROM attempts WHERE status='active'").fetchall()
    assert sorted(r[0] for r in active) == sorted(t for t, _ in mover.seen)
    assert dict(conn.execute("SELECT state, count(*) FROM files GROUP BY state")) == {
        "active": 2, "pending": 4}
    block.set()                     # the abandoned workers finish: one renamed in place
    deadline = time.monotonic() + 10
    while sum(1 for u in mover.files if TEMP_MARK not in u) < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    swept = recovery.sweep(conn, spec, lambda a, b, c: mover)
    assert swept.recovered == 2
    # no checksum in this spec and the right size... the final files are 100 bytes = done
    assert dict(conn.execute("SELECT state, count(*) FROM files GROUP BY state")) == {
        "done": 2, "pending": 4}
    assert journal.leftover_temps(conn) == []


def _local_campaign(tmp_path, name="lt"):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    for i in range(2):
        (src / f"f{i}.dat").write_bytes(b"x" * (100 + i))
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(f"""campaign: {name}
source: {{url: "file://{src}/", files: {{glob: "*.dat"}}}}
destinations:
  - tier: T1
    pool: ["file://{dst}/"]
checksum: none
overwrite: true
""")
    return spec, dst


def _leave_temp(dst, name="lt"):
    """A failed attempt whose mover could not remove its temporary file."""
    left = dst / ".f0.dat.gxpart-dead01"
    left.write_bytes(b"partial")
    conn = journal.connect(journal.journal_path(name))
    conn.execute("INSERT INTO attempts (file_id, tier, endpoint, dst_url, started, status, "
                 "tmp_url) VALUES (1, 'T1', ?, ?, 0, 'failed', ?)",
                 (f"file://{dst}/", f"file://{dst}/f0.dat", f"file://{left}"))
    conn.close()
    return left


def test_resume_and_replace_remove_the_temporaries_a_journal_records(gridxfer_home, tmp_path,
                                                                     capsys):
    from gridxfer.cli.main import main
    spec, dst = _local_campaign(tmp_path)
    assert main(["campaign", "run", "--quiet", str(spec)]) == 0
    left = _leave_temp(dst)
    capsys.readouterr()
    assert main(["campaign", "resume", "--quiet", "lt"]) == 0
    assert not left.exists()
    assert "cleanup: 1 temporary or partial files left by earlier runs removed" in \
        capsys.readouterr().out
    left = _leave_temp(dst)
    assert main(["campaign", "run", "--quiet", "--replace", str(spec)]) == 0
    assert not left.exists()                        # swept before the journal went
    assert sorted(p.name for p in dst.iterdir()) == ["f0.dat", "f1.dat"]


def test_recovery_lists_the_shortened_temporary_names_of_a_long_name():
    """A long name's temporary names are shortened (urls.temp_stem): the directory scan of
    recovery finds them by the same stem, and not those of a long name that begins alike."""
    from gridxfer.movers.urls import temp_url
    d = POOL[0]
    a, b = d + "L" * 240 + "a", d + "L" * 240 + "b"
    mine = [temp_url(a, "t1"), temp_url(a, "t2")]
    files = {u: 1 for u in [*mine, temp_url(b, "t3"), a, b]}

    class Lister:
        def listdir(self, url):
            return [Entry(u, n) for u, n in files.items() if u.startswith(url)]

    assert all(len(u.rpartition("/")[2]) <= 255 for u in files)
    assert sorted(recovery._temp_names(Lister(), a, {})) == sorted(mine)
