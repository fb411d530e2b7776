"""Fail fast on a dead endpoint (issue 17): the circuit breaker's cooldowns are campaign
settings, a pool that is down as a whole fails its files within their retries (or waits
up to ``on_pool_down: {wait: D}``), the live view shows the excluded endpoints and why,
and a refusing endpoint is never a BLACK HOLE. Pure logic with a scripted mover; the
same on real servers: tests/integration/test_failfast.py."""
from __future__ import annotations

import threading
import time

import pytest

from gridxfer.campaign.journal import planning, store as journal
from gridxfer.campaign.engine import scheduler
from gridxfer.campaign.policy.exclusion_log import ExcludedEndpoint
from gridxfer.campaign.policy.exclusions import DefaultExclusions
from gridxfer.campaign.engine.factories import default_exclusion_factory
from gridxfer.campaign.engine.pooldown import PoolDown
from gridxfer.cli.progress import health_lines, render
from gridxfer.campaign.report.share import endpoint_share, render_share
from gridxfer.campaign.spec.schema import (CampaignSpec, ChecksumSpec, CircuitSpec, RetrySpec,
                                    SourceSpec, TierSpec, load_spec, spec_from_dict,
                                    spec_to_dict)
from gridxfer.campaign.accounting.stats import Accounting
from gridxfer.errors import ErrorClass, SpecError, TransferError
from gridxfer.movers.base import TransferOutcome

DEAD = "root://dead.invalid:1//d/"
LIVE = "root://live.invalid:1//d/"

SPEC = """\
campaign: c
source: {url: "root://h:1094//s/", files: {glob: "*"}}
destinations:
  - tier: T1
    pool: ["root://h:1095//d/"]
"""


# ------------------------------------------------------------------ settings
@pytest.mark.parametrize("extra, circuit, wait", [
    ("", CircuitSpec(15.0, 300.0), 0.0),
    ("circuit_breaker: {cooldown: 2s, max_cooldown: 1m}\n", CircuitSpec(2.0, 60.0), 0.0),
    ("circuit_breaker: {cooldown: 10m}\n", CircuitSpec(600.0, 600.0), 0.0),
    ("on_pool_down: fail\n", CircuitSpec(), 0.0),
    ("on_pool_down: wait\n", CircuitSpec(), 3600.0),
    ("on_pool_down: {wait: 30m}\n", CircuitSpec(), 1800.0),
])
def test_settings_are_read_and_round_trip(tmp_path, extra, circuit, wait):
    path = tmp_path / "c.yaml"
    path.write_text(SPEC + extra)
    spec = load_spec(path)
    assert (spec.circuit_breaker, spec.pool_down_wait) == (circuit, wait)
    assert spec_from_dict(spec_to_dict(spec)) == spec
    old = spec_to_dict(spec)                # a journal written before these settings
    del old["circuit_breaker"], old["pool_down_wait"]
    assert spec_from_dict(old).circuit_breaker == CircuitSpec()


@pytest.mark.parametrize("extra, needle", [
    ("circuit_breaker: {cooldown: 0s}\n",
     "circuit_breaker.cooldown: must be at least 1s, got '0s'"),
    ("circuit_breaker: {cooldown: 2h}\n", "circuit_breaker.cooldown: 2h is above the limit 1h ("),
    ("circuit_breaker: {cooldown: soon}\n", "circuit_breaker.cooldown: not a duration"),
    ("circuit_breaker: {cooldown: 1m, max_cooldown: 30s}\n",
     "circuit_breaker.max_cooldown: 30.0s is below cooldown 1m00s"),
    ("circuit_breaker: {max_cooldown: 2d}\n",
     "circuit_breaker.max_cooldown: 2d is above the limit 1d"),
    ("circuit_breaker: {cooldwn: 1m}\n",
     "circuit_breaker.cooldwn: unknown key (did you mean 'cooldown'?)"),
    ("circuit_breaker: 15s\n", "circuit_breaker: expected a mapping"),
    ("on_pool_down: retry\n",
     "on_pool_down: must be fail, wait or {wait: <duration>}, got 'retry'"),
    ("on_pool_down: {wait: 0s}\n", "on_pool_down.wait: must be at least 1s"),
    ("on_pool_down: {wait: 30d}\n", "on_pool_down.wait: 30d is above the limit 7d"),
    ("on_pool_down: {fail: 1m}\n", "on_pool_down.fail: unknown key"),
    ("on_pool_down: {}\n", "on_pool_down.wait: required key is missing"),
    ("on_pool_down: true\n", "on_pool_down: expected a non-empty string"),
])
def test_bad_settings_name_file_line_and_field(tmp_path, extra, needle):
    path = tmp_path / "c.yaml"
    path.write_text(SPEC + "retries: {max: 1, backoff: 1s}\n" + extra)
    with pytest.raises(SpecError) as err:
        load_spec(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}:7: ") and needle in msg and "\n" not in msg, msg


def test_cooldowns_are_honoured_and_double_up_to_the_maximum():
    spec = CampaignSpec(name="c", source=SourceSpec(url="root://h//s/"),
                        destinations=(TierSpec("T1", (DEAD,)),),
                        circuit_breaker=CircuitSpec(cooldown=2.0, max_cooldown=5.0))
    policy = default_exclusion_factory(spec)
    assert (policy.cooldown, policy.max_cooldown) == (2.0, 5.0)
    policy._watch = False                   # no space queries of a made-up host
    now, untils = 100.0, []
    for _ in range(4):                      # trip, then a failed probe after each cooldown
        policy.record(DEAD, False, "connection", now)
        ok, ex = policy.eligible([DEAD], {}, now)
        assert ok == [] and ex[0].until is not None
        untils.append(ex[0].until - now)
        now = ex[0].until
    assert untils == [2.0, 4.0, 5.0, 5.0]
    assert DefaultExclusions().cooldown == 15.0 and DefaultExclusions().max_cooldown == 300.0


def test_down_is_a_failure_without_a_success_since():
    p = DefaultExclusions(space=False, cooldown=10.0)
    assert p.down(DEAD, 0.0) is None
    p.record(DEAD, False, "connection", 5.0)
    d = p.down(DEAD, 6.0)
    assert (d.since, d.error_class) == (5.0, "connection") and "1 failure in a row" in d.reason
    p.record(DEAD, False, "connection", 20.0)           # the half-open probe fails: still since 5
    assert p.down(DEAD, 21.0).since == 5.0
    p.record(DEAD, True, None, 45.0)                    # a write went through: up again
    assert p.down(DEAD, 46.0) is None
    p.record(LIVE, False, "no_space", 50.0)
    assert p.down(LIVE, 51.0).error_class == "no_space" and p.down(LIVE, 200.0) is None
    p.record(LIVE, False, "timeout", 201.0)             # 1 of 3 timeouts: not down
    assert p.down(LIVE, 202.0) is None


# ------------------------------------------------------------------ the scheduler
class Mover:
    """Refuses connections to DEAD (and to every endpoint until ``up`` is set)."""

    def __init__(self, up: threading.Event | None = None) -> None:
        self.up = up
        self.calls: list[str] = []
        self.lock = threading.Lock()

    def copy(self, src, dst, *, params, progress=None):
        with self.lock:
            self.calls.append(dst)
        if dst.startswith(DEAD) and (self.up is None or not self.up.is_set()):
            raise TransferError(ErrorClass.CONNECTION, f"{dst}: [FATAL] Connection error")
        return TransferOutcome(100, 0.001, None, 1, "fake")


_RETRIES, _CIRCUIT = RetrySpec(1, 0.3), CircuitSpec()


def campaign(pool, n, *, retries=_RETRIES, wait=0.0, circuit=_CIRCUIT, max_active=4):
    spec = CampaignSpec(name="dead", source=SourceSpec(url="root://src.invalid:1//s/"),
                        destinations=(TierSpec("T1", tuple(pool), max_active=max_active,
                                               min_active=1),),
                        retries=retries, checksum=ChecksumSpec(None, "none"),
                        circuit_breaker=circuit, pool_down_wait=wait, timeout=30.0)
    conn = journal.connect(journal.journal_path(spec.name), create=True)
    planning.plan(conn, {"name": spec.name}, ((f"f{i}", f"root://src.invalid:1//s/f{i}", 100, "T1",
                                              None) for i in range(n)))
    return spec, conn


def run(spec, conn, mover, **kw):
    cb = spec.circuit_breaker
    s = scheduler.Scheduler(
        conn, spec, mover_factory=lambda a, b, c: mover,
        optimizer_factory=scheduler.fixed_optimizer_factory, selector_name="round-robin",
        exclusion_factory=lambda: DefaultExclusions(space=False, cooldown=cb.cooldown,
                                                    max_cooldown=cb.max_cooldown), **kw)
    return s, s.run()


def files(conn):
    return [dict(r) for r in conn.execute("SELECT * FROM files ORDER BY id")]


def test_dead_pool_fails_every_file_within_its_retries(gridxfer_home):
    """retries {max: 1, backoff: 0.3s}, cooldown 15 s: every file fails with the exclusion's
    class and reason within max x backoff of the pool going down, the dead endpoint is
    tried only by the first files (no half-open probe: the cooldown never ends in time)."""
    spec, conn = campaign([DEAD], 10)
    mover = Mover()
    _, res = run(spec, conn, mover)
    assert (res.state, res.files_done, res.files_failed) == ("partial", 0, 10)
    rows = files(conn)
    assert {r["error_class"] for r in rows} == {"connection"}
    for r in rows:
        assert DEAD in r["error_msg"] and "circuit open: 1 failure in a row (last: connection)" \
            in r["error_msg"] and "on_pool_down: fail" in r["error_msg"], r
        assert 1 <= r["attempts"] <= spec.retries.max + 1
    assert len(mover.calls) <= 4                            # the first dispatch only (max_active)
    tried = {c.rsplit("/", 1)[1] for c in mover.calls}
    for r in rows:              # the files tried keep their own error after the pool's
        last = f"; last attempt: connection: {DEAD}{r['name']}: [FATAL] Connection error"
        assert r["error_msg"].endswith(last) == (r["name"] in tried), r
    tried = conn.execute("SELECT min(started), max(ended) FROM attempts").fetchone()
    assert tried[1] - tried[0] < 15.0                       # no cooldown waited for
    down = list(journal.last_events(conn, "pool_down"))
    failed = list(journal.last_events(conn, "pool_failed"))
    assert len(down) == 1 and down[0]["deadline"] - down[0]["since"] == pytest.approx(0.3)
    assert failed and failed[0]["reason"] == rows[-1]["error_msg"]
    last_update = max(r["updated"] for r in rows)
    assert last_update - down[0]["since"] < 10.0            # not the 15 s cooldown


def test_charged_files_spend_their_own_budget(gridxfer_home):
    """A file that comes due while the pool is down is charged an attempt it did not make
    (no transfer): f0, with one retry left from an earlier run, fails as soon as it is due,
    long before the tier's deadline (since + 2 x 2 s) fails the others."""
    spec, conn = campaign([DEAD], 4, retries=RetrySpec(2, 2.0), max_active=1)
    due = time.time() + 0.5
    conn.execute("UPDATE files SET attempts = 2, not_before = ? WHERE name = 'f0'", (due,))
    mover = Mover()
    _, res = run(spec, conn, mover)
    assert res.files_failed == 4
    rows = {r["name"]: r for r in files(conn)}
    assert [c.rsplit("/", 1)[1] for c in mover.calls] == ["f1"]     # the only transfer
    down = list(journal.last_events(conn, "pool_down"))[0]
    f0 = rows.pop("f0")
    assert (f0["state"], f0["attempts"], f0["error_class"]) == ("failed", 3, "connection")
    assert f0["error_msg"].startswith(f"not tried: every endpoint of T1 is down: {DEAD} "
                                      "excluded: circuit open: 1 failure in a row")
    assert due <= f0["updated"] < down["deadline"]
    f1 = rows["f1"]["error_msg"]    # charged (or not) after its attempt, failed at the
    assert f1.startswith("every endpoint of T1 is down: ") and f1.count(    # deadline: its
        "; last attempt: ") == 1 and f1.endswith(                           # error, once
        f"; last attempt: connection: {DEAD}f1: [FATAL] Connection error"), f1
    for r in rows.values():     # f1: tried, then charged at T+2; f2, f3: charged at T and
        assert r["state"] == "failed" and r["error_class"] == "connection"     # T+2; then
        assert r["attempts"] in (1, 2) and r["updated"] >= down["deadline"], r  # the deadline
        assert r["not_before"] > down["since"]
    assert sum(r["attempts"] for r in rows.values()) >= 3   # f2, f3 charged at least once


def test_one_dead_endpoint_does_not_fail_the_pool(gridxfer_home):
    spec, conn = campaign([DEAD, LIVE], 20)
    mover = Mover()
    _, res = run(spec, conn, mover)
    assert (res.files_done, res.files_failed) == (20, 0)
    assert not list(journal.last_events(conn, "pool_down"))
    ex = list(journal.last_events(conn, "excluded"))
    assert ex and ex[0]["url"] == DEAD and "last: connection" in ex[0]["reason"]


def test_wait_keeps_the_budget_and_fails_at_the_bound(gridxfer_home):
    spec, conn = campaign([DEAD], 3, wait=3.0, circuit=CircuitSpec(1.0, 1.0))
    mover = Mover()
    _, res = run(spec, conn, mover)
    assert res.files_failed == 3
    rows = files(conn)
    # max 1: without the wait, the probes every second would have spent the budgets; a
    # probe that ends after the deadline counts (attempts 1), one that ends before does not
    assert all(r["attempts"] <= 1 and "on_pool_down: wait 3.0s" in r["error_msg"]
               for r in rows), rows
    down = list(journal.last_events(conn, "pool_down"))
    assert down[0]["on_pool_down"] == "wait" and down[0]["deadline"] - down[0]["since"] == 3.0
    ended = max(r["updated"] for r in rows)
    assert ended >= down[0]["deadline"]                     # it did wait
    probes = conn.execute("SELECT count(*) FROM attempts WHERE started > ?",
                          (down[0]["since"],)).fetchone()[0]
    assert probes >= 1                                      # the half-open probe went out
    together = conn.execute("SELECT started FROM attempts WHERE started > ? GROUP BY started "
                            "HAVING count(*) > 1", (down[0]["since"],)).fetchall()
    assert together == []                                   # one probe at a time


def test_wait_succeeds_when_the_endpoint_comes_back(gridxfer_home):
    up = threading.Event()
    spec, conn = campaign([DEAD], 5, wait=60.0, circuit=CircuitSpec(2.0, 2.0))
    mover = Mover(up)

    def observer(snap):
        if snap.pools_down and not up.is_set():
            lines = [line for line, _ in health_lines(snap)]
            assert any(line.startswith("excluded T1 dead: circuit open") for line in lines)
            assert any("pool of T1 down since" in line and "on_pool_down: wait" in line
                       for line in lines)
            seen.append(snap)
            up.set()                                        # the server is back

    seen: list = []
    _, res = run(spec, conn, mover, observers=[observer])
    assert (res.files_done, res.files_failed) == (5, 0) and seen
    assert list(journal.last_events(conn, "pool_up"))
    assert all(r["attempts"] <= 2 for r in files(conn))     # waiting did not spend retries


# ------------------------------------------------------------------ the live view
def test_live_view_shows_excluded_endpoints_and_pools_down():
    acct = Accounting({"T1": (DEAD, LIVE)}, started=0.0, clock=lambda: 10.0)
    snap = acct.snapshot(10.0)
    import dataclasses
    snap = dataclasses.replace(snap, excluded=(
        ExcludedEndpoint("T1", DEAD, "circuit open: 1 failure in a row (last: connection); "
                                     "cooldown 15.0s", 9.0, 22.0),),
        pools_down=(PoolDown("T1", 9.0, 10.5, "connection", "every endpoint of T1 is down",
                             False),))
    text = "\n".join(line for line, _ in health_lines(snap))
    assert ("excluded T1 dead: circuit open: 1 failure in a row (last: connection) "
            "(probed again in 12.0s)") in text
    assert "pool of T1 down since 1.0s: its files fail within 0.5s (on_pool_down: fail)" in text
    from rich.console import Console
    con = Console(width=200, record=True)
    con.print(render(snap, "c"))
    assert "excluded T1" in con.export_text()


# ------------------------------------------------------------------ BLACK HOLE
def _attempt(conn, i, ep, started, ended, nbytes, status="ok", error_class=None):
    conn.execute("INSERT INTO files (id, name, src_url, size, tier) VALUES (?, ?, ?, ?, 'T1')",
                 (i, f"f{i}", f"file:///s/f{i}", nbytes))
    conn.execute("INSERT INTO attempts (file_id, tier, endpoint, dst_url, started, ended, bytes,"
                 " status, error_class) VALUES (?, 'T1', ?, ?, ?, ?, ?, ?, ?)",
                 (i, ep, ep + f"f{i}", started, ended, nbytes, status, error_class))


def test_refusing_endpoint_is_never_a_black_hole(gridxfer_home):
    """A client that takes its time to give up on a closed port (XrdCl's connection window)
    gives the refusing endpoint long attempts with no bytes: not sessions it held."""
    conn = journal.connect(journal.journal_path("bh"), create=True)
    for i in range(8):
        _attempt(conn, i, LIVE, 1000.0 + i, 1001.0 + i, 10_000_000)
    for i in range(8, 14):
        _attempt(conn, i, DEAD, 1000.0, 1008.0, 0, "failed", "connection")
    rep = endpoint_share(conn, bins=4)
    by = {e.endpoint: e for e in rep.endpoints}
    assert not by[DEAD].blackhole and by[DEAD].failures == 6 and rep.blackholes == []
    assert "BLACK HOLE" not in render_share(rep)
    # the same endpoint holding sessions (connected, slow, timing out) is one
    for i in range(14, 17):
        _attempt(conn, i, DEAD, 1000.0, 1008.0, 0, "failed", "timeout")
    assert endpoint_share(conn, bins=4).blackholes == [DEAD]


@pytest.mark.parametrize("cls, old, new", [
    (None, None, "M"),
    ("timeout", "", "M"),
    ("timeout", "PUT had no answer", "M; last attempt: timeout: PUT had no answer"),
    ("connection", "not tried: D", "M"),
    ("connection", "not tried: D; last attempt: timeout: PUT", "M; last attempt: timeout: PUT"),
    (None, "a 'quoted' %_ text", "M; last attempt: a 'quoted' %_ text"),
])
def test_a_message_written_while_the_pool_is_down_keeps_the_last_attempts(cls, old, new):
    """ledger.KEEP_LAST, as the charge and the deadline's failure write it."""
    import sqlite3
    from gridxfer.campaign.engine.ledger import KEEP_LAST
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE files (error_class TEXT, error_msg TEXT)")
    db.execute("INSERT INTO files VALUES (?, ?)", (cls, old))
    db.execute(f"UPDATE files SET error_class = 'x', error_msg = {KEEP_LAST}", ("M",))
    assert db.execute("SELECT error_msg FROM files").fetchone()[0] == new
