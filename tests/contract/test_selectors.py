"""One contract, run against every registered DestinationSelector."""
from __future__ import annotations

import random
from collections import Counter

import pytest

from gridxfer.campaign.policy.exclusions import DefaultExclusions
from gridxfer.campaign.policy.selection import SELECTORS, EndpointStats, FileToPlace, make_selector

MB = 1_000_000
POOL = ["root://a//d/", "root://b//d/", "root://c//d/", "root://d//d/"]
FILE = FileToPlace(7, "run1/f.root", 10 * MB)


@pytest.fixture(params=sorted(SELECTORS))
def selector(request):
    return make_selector(request.param)


def random_stats(rnd: random.Random, urls) -> dict[str, EndpointStats]:
    out = {}
    for u in urls:
        if rnd.random() < 0.2:
            continue                         # no stats at all for some endpoints
        out[u] = EndpointStats(
            url=u, pending=rnd.randint(0, 6), pending_bytes=rnd.randint(0, 500) * MB,
            ewma_rate=rnd.choice([0.0, rnd.uniform(1, 100) * MB]),
            throughput=rnd.choice([0.0, rnd.uniform(1, 300) * MB]),
            completed=rnd.randint(0, 20), failures_in_row=rnd.randint(0, 4),
            free_bytes=rnd.choice([None, rnd.randint(0, 10**4) * MB]))
    return out


def test_has_a_name_matching_its_registry_key(selector):
    assert SELECTORS[selector.name] is type(selector)


def test_always_returns_one_of_the_candidates(selector):
    rnd = random.Random(3)
    for _ in range(300):
        cands = rnd.sample(POOL, rnd.randint(1, len(POOL)))
        stats = random_stats(rnd, POOL)
        size = rnd.choice([0, 1, 10 * MB, 10**12])
        assert selector.choose(FileToPlace(1, "x", size), cands, stats) in cands


def test_a_single_candidate_is_returned(selector):
    stats = {POOL[0]: EndpointStats(url=POOL[0], pending=99, pending_bytes=10**12,
                                    throughput=1.0)}
    assert selector.choose(FILE, [POOL[0]], stats) == POOL[0]
    assert selector.choose(FILE, [POOL[1]], {}) == POOL[1]


def test_no_candidates_is_an_error_not_a_guess(selector):
    with pytest.raises(ValueError):
        selector.choose(FILE, [], {})


def test_never_returns_an_excluded_endpoint(selector):
    policy = DefaultExclusions(failure_threshold=1)
    policy.record(POOL[1], False, "connection", 0.0)       # circuit open
    policy.record(POOL[2], False, "no_space", 0.0)         # full
    rnd = random.Random(5)
    for i in range(200):
        stats = random_stats(rnd, POOL)
        stats[POOL[3]] = EndpointStats(url=POOL[3], free_bytes=0)   # no room at all
        stats[POOL[0]] = EndpointStats(url=POOL[0], pending=rnd.randint(0, 50),
                                       pending_bytes=rnd.randint(0, 10**4) * MB)
        ok, excluded = policy.eligible(POOL, stats, 1.0 + i * 0.01, FILE)
        assert {e.url for e in excluded} >= {POOL[1], POOL[2], POOL[3]}
        assert selector.choose(FILE, ok, stats) == POOL[0]


def test_ties_are_spread_over_the_pool(selector):
    """A fresh pool with identical stats must not pile every file onto one endpoint."""
    for stats in ({}, {u: EndpointStats(url=u) for u in POOL},
                  {u: EndpointStats(url=u, throughput=50 * MB, completed=3) for u in POOL}):
        picks = Counter(selector.choose(FILE, POOL, stats) for _ in range(40))
        assert set(picks) == set(POOL) and max(picks.values()) <= 2 * min(picks.values())


def test_does_not_mutate_its_inputs(selector):
    cands = list(POOL)
    stats = random_stats(random.Random(9), POOL)
    before = (list(cands), dict(stats))
    selector.choose(FILE, cands, stats)
    assert (cands, stats) == before


def test_load_aware_selectors_avoid_a_loaded_endpoint(selector):
    """Everything equal except that one endpoint has a pile of sessions and bytes."""
    if selector.name == "round-robin":
        pytest.skip("round-robin is load-blind by design (the baseline)")
    stats = {u: EndpointStats(url=u, pending=1, pending_bytes=10 * MB, throughput=50 * MB,
                              completed=5) for u in POOL}
    stats[POOL[0]] = EndpointStats(url=POOL[0], pending=20, pending_bytes=400 * MB,
                                   throughput=50 * MB, completed=5)
    assert all(selector.choose(FILE, POOL, stats) != POOL[0] for _ in range(20))
