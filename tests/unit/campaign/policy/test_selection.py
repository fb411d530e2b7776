"""Selectors on recorded stats, and on a fluid simulation of a pool with a slow server."""
from __future__ import annotations

import math

import pytest

from gridxfer.campaign.accounting.meter import EndpointMeter
from gridxfer.campaign.policy.selection import (DEFAULT_SELECTOR, SELECTORS,
                                                EndpointStats, FileToPlace,
                                         LeastPending, RoundRobin, ThroughputAware, capacity,
                                         make_selector)
from gridxfer.errors import UsageError

MB = 1_000_000
F100 = FileToPlace(1, "f", 100 * MB)


def st(url, **kw):
    return EndpointStats(url=url, **kw)


def test_default_is_throughput_aware():
    assert DEFAULT_SELECTOR == "throughput-aware"
    assert isinstance(make_selector(), ThroughputAware)
    assert set(SELECTORS) == {"round-robin", "least-pending", "throughput-aware"}


def test_unknown_selector_is_a_usage_error():
    with pytest.raises(UsageError, match="least-pending"):
        make_selector("dns")


def test_round_robin_cycles_whatever_the_load():
    rr = RoundRobin()
    stats = {"a": st("a", pending=50), "b": st("b")}
    assert [rr.choose(F100, ["a", "b"], stats) for _ in range(4)] == ["a", "b", "a", "b"]


def test_least_pending_picks_fewest_sessions_then_fewest_bytes():
    lp = LeastPending()
    stats = {"a": st("a", pending=3, pending_bytes=10),
             "b": st("b", pending=1, pending_bytes=900 * MB),
             "c": st("c", pending=2)}
    assert lp.choose(F100, ["a", "b", "c"], stats) == "b"
    stats["c"] = st("c", pending=1, pending_bytes=100 * MB)
    assert lp.choose(F100, ["a", "b", "c"], stats) == "c"


def test_capacity_prefers_aggregate_throughput_then_per_session_times_sessions():
    assert capacity(st("a", throughput=50 * MB, ewma_rate=5 * MB, pending=4)) == 50 * MB
    assert capacity(st("a", ewma_rate=5 * MB, pending=4)) == 20 * MB
    assert capacity(st("a", ewma_rate=5 * MB)) == 5 * MB
    assert capacity(st("a")) == 0.0 and capacity(None) == 0.0


def test_throughput_aware_picks_earliest_estimated_finish():
    ta = ThroughputAware()
    # fast: 500 MB queued at 100 MB/s -> this file done in 6 s; slow: idle, 10 MB/s -> 10 s
    stats = {"fast": st("fast", pending=5, pending_bytes=500 * MB, throughput=100 * MB),
             "slow": st("slow", throughput=10 * MB, completed=3)}
    assert ta.choose(F100, ["fast", "slow"], stats) == "fast"
    assert ta.estimate(F100, stats["fast"], 0) == pytest.approx(6.0)
    # fast with 1000 MB queued -> 11 s: now the idle slow server finishes it first
    stats["fast"] = st("fast", pending=10, pending_bytes=1000 * MB, throughput=100 * MB)
    assert ta.choose(F100, ["fast", "slow"], stats) == "slow"
    # but never a second file on the slow one while the fast one is quicker
    stats["slow"] = st("slow", pending=1, pending_bytes=100 * MB, throughput=10 * MB)
    assert ta.choose(F100, ["fast", "slow"], stats) == "fast"


def test_throughput_aware_probes_an_unknown_endpoint_once():
    ta = ThroughputAware()
    stats = {"known": st("known", pending=2, pending_bytes=200 * MB, throughput=100 * MB),
             "new": st("new")}
    assert ta.choose(F100, ["known", "new"], stats) == "new"     # optimistic prior
    stats["new"] = st("new", pending=1, pending_bytes=100 * MB)  # probe in flight, still unknown
    assert all(ta.choose(F100, ["known", "new"], stats) == "known" for _ in range(5))
    assert math.isinf(ta.estimate(F100, stats["new"], 100 * MB))


def test_throughput_aware_without_any_measurement_is_least_pending():
    ta = ThroughputAware()
    stats = {"a": st("a", pending=2), "b": st("b", pending=1), "c": st("c", pending=3)}
    assert ta.choose(F100, ["a", "b", "c"], stats) == "b"
    assert ta.choose(F100, ["a", "b", "c"], {}) in {"a", "b", "c"}


# -- a fluid simulation: one link, max_active slots, servers sharing a fixed capacity --

def simulate(selector_name, caps, *, files=120, size=5 * MB, slots=8, dt=0.005, progress=False,
             backlog=False):
    """Makespan of ``files`` equal files over endpoints of aggregate capacities ``caps``."""
    sel = make_selector(selector_name)
    meter = EndpointMeter()
    urls = list(caps)
    for u in urls:
        meter.add_endpoint(u, 0.0)
    inflight: dict[int, list] = {}          # key -> [url, remaining]
    queue = list(range(files))
    placed = {u: 0 for u in urls}
    t = 0.0
    while queue or inflight:
        while queue and len(inflight) < slots:
            key = queue.pop(0)
            left = len(queue) * size if backlog else 0
            url = sel.choose(FileToPlace(key, f"f{key}", size, left), urls, meter.snapshot(t))
            placed[url] += 1
            meter.start(url, key, size, t)
            inflight[key] = [url, size]
        t += dt
        for u in urls:
            mine = [k for k, v in inflight.items() if v[0] == u]
            for k in mine:
                inflight[k][1] -= caps[u] / len(mine) * dt
                if progress:
                    meter.progress(u, k, int(size - max(inflight[k][1], 0)), t)
        for k in [k for k, v in inflight.items() if v[1] <= 0]:
            meter.end(inflight.pop(k)[0], k, True, t)
    return t, placed


BLACKHOLE = {"fast1": 20 * MB, "fast2": 20 * MB, "slow": 2 * MB}


def test_simulated_blackhole_throughput_aware_near_ideal_and_beats_round_robin():
    ideal = 120 * 5 * MB / sum(BLACKHOLE.values())
    ta, placed = simulate("throughput-aware", BLACKHOLE)
    rr, rr_placed = simulate("round-robin", BLACKHOLE)
    lp, _ = simulate("least-pending", BLACKHOLE)
    assert ideal / ta >= 0.9, (ta, ideal, placed)
    assert rr / ta >= 1.5
    assert rr_placed["slow"] == 40                     # the black hole: a third of the files
    assert placed["slow"] <= 10                        # ~ its 1/21 share of capacity
    assert ta <= 1.02 * lp and lp <= rr


def test_simulated_equal_pool_is_spread_evenly():
    _, placed = simulate("throughput-aware", {"a": 10 * MB, "b": 10 * MB, "c": 10 * MB},
                         files=60, progress=True)
    assert all(15 <= n <= 25 for n in placed.values()), placed


def test_backlog_keeps_a_slow_endpoint_busy_without_hurting_the_tail():
    ideal = 120 * 5 * MB / sum(BLACKHOLE.values())
    plain, p_placed = simulate("throughput-aware", BLACKHOLE)
    aware, a_placed = simulate("throughput-aware", BLACKHOLE, backlog=True)
    assert a_placed["slow"] > p_placed["slow"]           # uses the slow server's capacity
    assert aware <= plain and ideal / aware >= 0.95, (aware, plain, ideal, a_placed)
    rr, _ = simulate("round-robin", BLACKHOLE, backlog=True)
    assert rr / aware >= 1.5


def test_backlog_rule_on_recorded_stats():
    ta = ThroughputAware()
    stats = {"fast": st("fast", pending=4, pending_bytes=20 * MB, throughput=20 * MB),
             "slow": st("slow", throughput=2 * MB, completed=3)}
    f = FileToPlace(1, "f", 5 * MB)
    assert ta.choose(f, ["fast", "slow"], stats) == "fast"          # earliest finish: 1.25 s
    # 200 MB still waiting: the pool needs >= 10 s, the slow one does this file in 2.5 s
    busy = FileToPlace(1, "f", 5 * MB, backlog_bytes=200 * MB)
    assert ta.choose(busy, ["fast", "slow"], stats) == "slow"
    # near the end (5 MB waiting: drain 1.36 s) the slow one would be the tail
    assert ta.choose(FileToPlace(1, "f", 5 * MB, 5 * MB), ["fast", "slow"], stats) == "fast"
