"""Default concurrency ceilings of tiers without max_active (engine/ceilings.py)."""
from __future__ import annotations

from gridxfer import limits
from gridxfer.campaign.engine.ceilings import default_ceiling, effective_tiers
from gridxfer.campaign.engine.factories import default_optimizer_factory
from gridxfer.campaign.policy.optimizer import START_MAX
from gridxfer.campaign.spec.model import TierSpec

KB, MB = 1 << 10, 1 << 20


def test_the_ceiling_follows_the_mean_file_size():
    assert default_ceiling(0) == default_ceiling(4 * KB) == default_ceiling(1 * MB) == 128
    assert default_ceiling(1 * MB + 1) == default_ceiling(64 * MB) == 32
    assert default_ceiling(64 * MB + 1) == default_ceiling(10 << 30) == 16


def test_only_tiers_without_max_active_get_one():
    small = TierSpec("S", ("root://a//d/",), auto_ceiling=True)
    bulk = TierSpec("B", ("root://b//d/",), auto_ceiling=True, min_active=20)
    pinned = TierSpec("P", ("root://c//d/",), max_active=6)
    tally = {"S": {"pending": (2000, 2000 * 4 * KB)}, "B": {"done": (3, 3 * 4096 * MB),
                                                              "pending": (1, 4096 * MB)}}
    s, b, p = effective_tiers((small, bulk, pinned), tally)
    assert (s.max_active, b.max_active, p) == (128, 20, pinned)   # min_active wins over 16


def test_default_ceilings_stay_within_the_thread_limit():
    tiers = [TierSpec(f"T{i}", ("root://a//d/",), auto_ceiling=True) for i in range(12)]
    tiers.append(TierSpec("P", ("root://c//d/",), max_active=400))
    out = effective_tiers(tiers, {})
    assert sum(t.max_active for t in out) <= limits.MAX_ACTIVE_TOTAL.high
    assert {t.max_active for t in out[:-1]} == {(limits.MAX_ACTIVE_TOTAL.high - 400) // 12}


def test_a_default_ceiling_starts_at_a_quarter_and_a_given_one_at_half():
    auto = TierSpec("S", ("root://a//d/",), max_active=128, auto_ceiling=True)
    bulk = TierSpec("S", ("root://a//d/",), max_active=16, auto_ceiling=True)
    given = TierSpec("S", ("root://a//d/",), max_active=32)
    assert default_optimizer_factory(auto).start == 32
    assert default_optimizer_factory(bulk).start == START_MAX
    assert default_optimizer_factory(given).start == 16
