"""The per-link concurrency optimizer on simulated links and recorded samples."""
from __future__ import annotations

import itertools
import random

import pytest

from gridxfer.campaign.journal import store as journal
from gridxfer.campaign.policy.optimizer import (DEFAULT_OPTIMIZER, OPTIMIZERS, AdaptiveConcurrency,
                                         Decision, FixedConcurrency, LinkSample, make_optimizer)
from gridxfer.campaign.policy.optimizer_log import decision_event, link_status
from gridxfer.errors import UsageError

MB = 1e6


def run(opt, throughput, *, seconds=90.0, step=0.5, noise=0.05, seed=7, fail=None, queued=1000,
        counter=False):
    """Drive ``opt`` with a link whose rate is ``throughput(active)``; return the cap history.

    ``counter``: report a monotonic byte counter (``LinkSample.moved``) too."""
    rnd = random.Random(seed)
    cap, t, history, moved = None, 0.0, [], 0.0
    while t <= seconds:
        active = cap or 1
        rate = throughput(active) * rnd.uniform(1 - noise, 1 + noise)
        moved += rate * step
        ok, bad = (fail(t) if fail else (3, 0))
        d = opt.update(t, LinkSample("T1", active, rate, ok, bad, queued,
                                     moved=int(moved) if counter else -1))
        assert isinstance(d, Decision) and d.reason
        assert opt.min_active <= d.active <= opt.max_active
        history.append((t, d.active, d.reason))
        cap = d.active
        t += step
    return history


def settled_by(history, final_band=1):
    """The time after which the cap never leaves final +/- band."""
    final = history[-1][1]
    last_out = 0.0
    for t, cap, _ in history:
        if abs(cap - final) > final_band:
            last_out = t
    return last_out, final


SHAPES = {
    # capacity-limited link: 5 MB/s per transfer up to 40 MB/s (best: 8)
    "plateau": (lambda n: min(n * 5 * MB, 40 * MB), 8),
    # a server that degrades when overloaded (the black-hole shape; best: 6)
    "peaked": (lambda n: 6 * MB * n if n <= 6 else max(36 * MB - 4 * MB * (n - 6), 4 * MB), 6),
    # per-transfer limited all the way: ends near max_active
    "linear": (lambda n: n * 2 * MB, 24),
}


@pytest.mark.parametrize("counter", [False, True], ids=["rate", "counter"])
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("shape", SHAPES)
def test_converges_within_30s(shape, seed, counter):
    fn, best = SHAPES[shape]
    history = run(AdaptiveConcurrency(1, 24), fn, seed=seed, counter=counter)
    when, final = settled_by(history)
    assert when <= (20.0 if counter else 30.0), [h for h in history if h[0] <= when + 1]
    assert fn(final) >= 0.85 * fn(best), history[-1]      # within gain (10 %) + noise
    assert final <= 2 * best                               # without piling on sessions


def test_every_change_is_explained():
    history = run(AdaptiveConcurrency(2, 24), SHAPES["plateau"][0])
    changes = [(t, c, r) for (_, prev, _), (t, c, r) in itertools.pairwise(history) if c != prev]
    assert changes and all(("MB/s" in r) for _, _, r in changes)
    assert any("slow start" in r for _, _, r in changes)
    assert any("back to" in r or "converged" in r for _, _, r in changes)


def test_backs_off_on_failures():
    def fail(t):
        return (1, 4) if 40 <= t < 50 else (3, 0)
    history = run(AdaptiveConcurrency(2, 24), SHAPES["plateau"][0], fail=fail, seconds=60)
    before = [c for t, c, _ in history if 35 <= t < 40]
    during = [(c, r) for t, c, r in history if 44 <= t < 50]
    assert max(c for c, _ in during) < min(before)
    assert any("success rate 20% < 90%" in r for _, r in during)


def test_holds_when_the_link_has_no_more_work():
    opt = AdaptiveConcurrency(2, 24)
    caps = {opt.update(t, LinkSample("T1", 1, 5 * MB, 1, 0, 0)).active for t in range(0, 40)}
    assert caps == {opt.start} and opt.start == 12


def test_throughput_collapse_steps_down():
    opt = AdaptiveConcurrency(2, 24)
    history = run(opt, SHAPES["plateau"][0], seconds=30)
    cap = history[-1][1]
    t, caps = 30.5, []
    while t < 40:       # the same cap now yields a third of the rate
        caps.append(opt.update(t, LinkSample("T1", cap, 13 * MB, 3, 0, 1000)))
        t += 0.5
    assert caps[-1].active == cap - 1 and "throughput fell" in caps[-1].reason


def test_links_are_independent_and_fixed_is_fixed():
    opt = AdaptiveConcurrency(1, 4, start=3)
    assert opt.update(0.0, LinkSample("A", 0, 0, 0, 0, 10)).active == 3
    assert opt.update(0.0, LinkSample("B", 0, 0, 0, 0, 10)).active == 3
    assert FixedConcurrency(1, 6).update(0.0, LinkSample("A", 0, 0, 0, 0, 0)) == \
        Decision(6, "fixed at max_active")


def test_registry():
    assert DEFAULT_OPTIMIZER == "adaptive" and set(OPTIMIZERS) == {"adaptive", "fixed"}
    assert isinstance(make_optimizer("adaptive", 2, 8), AdaptiveConcurrency)
    with pytest.raises(UsageError):
        make_optimizer("fts", 1, 2)


def test_link_status_reads_the_latest_decision_per_link(gridxfer_home):
    conn = journal.connect(journal.journal_path("c1"), create=True)
    s = LinkSample("T1-CNAF", 2, 10 * MB, 4, 0, 50)
    journal.add_event(conn, "optimizer", 1.0, **decision_event(s, 2, Decision(4, "slow start")))
    journal.add_event(conn, "started", 1.5)
    journal.add_event(conn, "optimizer", 2.0, **decision_event(s, 4, Decision(8, "+4")))
    journal.add_event(conn, "optimizer", 3.0,
                      **decision_event(LinkSample("T2", 1, 1.0, 0, 0, 1), 2, Decision(1, "hold")))
    st = link_status(conn)
    assert [(x.tier, x.active, x.reason, x.since, x.decisions) for x in st] == [
        ("T1-CNAF", 8, "+4", 2.0, 2), ("T2", 1, "hold", 3.0, 1)]


def small_files_link(knee: int, per_slot: float = 22.0, size: int = 4096):
    """Files/s of a link of short transfers: ``per_slot`` files/s per transfer (2 round
    trips of 20 ms + overhead) up to ``knee`` transfers, flat after (the client's CPU)."""
    return lambda n: min(n, knee) * per_slot * size, lambda n: min(n, knee) * per_slot


@pytest.mark.parametrize("knee", [40, 80, 120])
def test_short_files_ramp_multiplicatively_and_settle_within_10s(knee):
    """Under a default ceiling (start 8, ceiling 128) with 4 KB files finishing in ~45 ms,
    slow start goes x4 without skipping a sample, and the cap is settled (never leaves
    its final value) within 10 s of simulated time, near the knee, every step explained."""
    from gridxfer.campaign.policy.optimizer import START_MAX
    rate_of, files_of = small_files_link(knee)
    opt = AdaptiveConcurrency(1, 128, start=START_MAX)
    rnd = random.Random(knee)
    t, cap, moved, history = 0.0, START_MAX, 0.0, []
    while t <= 40.0:
        r = rate_of(cap) * rnd.uniform(0.95, 1.05)
        moved += r * 0.5
        d = opt.update(t, LinkSample("T1", cap, r, int(files_of(cap) * 0.5), 0, 10_000,
                                     moved=int(moved)))
        history.append((t, d.active, d.reason))
        cap = d.active
        t += 0.5
    when, final = settled_by(history, final_band=1)      # steady: +1 probes
    assert when <= 10.0, [h for h in history if h[0] <= when + 1]
    assert rate_of(final) >= 0.85 * rate_of(knee)
    assert final <= 1.5 * knee + 2
    reasons = [r for _, _, r in history]
    assert any(r.startswith("short files") and "x4" in r for r in reasons)


def test_a_warm_up_full_of_short_transfers_ends_early():
    """Once EARLY_SHORT x cap transfers have ended in the first interval, the first ramp
    comes at the next update (1 s: the steering's period), not after the whole 1.5 s
    interval: a 3 s run of 2,000 x 4 KB spent 2 s at its start level. Few endings (long
    transfers) still wait for the interval."""
    from gridxfer.campaign.policy.optimizer import EARLY_SHORT
    short = AdaptiveConcurrency(1, 128, start=32)
    short.update(0.0, LinkSample("T1", 32, 1e6, 0, 0, 10_000, moved=0))
    d = short.update(1.0, LinkSample("T1", 32, 2.5e6, EARLY_SHORT * 32, 0, 10_000,
                                     moved=2_500_000))
    assert d.active == 128 and d.reason.startswith("short files (128 ended in 1.0 s)")
    long_ = AdaptiveConcurrency(1, 128, start=32)
    long_.update(0.0, LinkSample("T1", 32, 1e6, 0, 0, 10_000, moved=0))
    d = long_.update(1.0, LinkSample("T1", 32, 2.5e6, EARLY_SHORT * 32 - 1, 0, 10_000,
                                     moved=2_500_000))
    assert d.active == 32 and d.reason == "start at 32"


def test_only_the_warm_up_ends_early_with_or_without_a_byte_counter():
    """After the first sample, intervals run their full length however many transfers
    end, also for a link that reports no byte counter (``moved=-1``)."""
    from gridxfer.campaign.policy.optimizer import EARLY_SHORT
    for moved in (-1, 2_500_000):
        opt = AdaptiveConcurrency(1, 128, start=32)
        opt.update(0.0, LinkSample("T1", 32, 1e6, 0, 0, 10_000, moved=-1 if moved < 0 else 0))
        first = opt.update(1.0, LinkSample("T1", 128, 2.5e6, EARLY_SHORT * 32, 0, 10_000,
                                           moved=moved))
        assert first.active == 128
        later = opt.update(1.2, LinkSample("T1", 128, 9e6, 100 * EARLY_SHORT * 128, 0,
                                           10_000, moved=-1 if moved < 0 else 3_000_000))
        assert (later.active, later.reason) == (first.active, first.reason), moved
        assert first.ask_in == 0.75 and later.ask_in == 0.55    # the half interval's end


def test_a_warming_link_asks_to_be_looked_at_every_quarter_second():
    """The early end of the warm-up can only come when the optimizer is asked: the steering's
    1 s tick put the first x4 of a 2,000 x 4 KB run at 1.01 s. Once warmed up, it asks at
    its interval's end."""
    from gridxfer.campaign.policy.optimizer import EARLY_SHORT, WARM_ASK
    opt = AdaptiveConcurrency(1, 128, start=32)
    assert opt.update(0.0, LinkSample("T1", 32, 0, 0, 0, 10_000, moved=0)).ask_in == WARM_ASK
    assert opt.update(0.25, LinkSample("T1", 32, 1e6, 40, 0, 10_000,
                                       moved=160_000)).ask_in == WARM_ASK
    # rate 0: the accounting's own rate before its first 1 s tick; the byte counter counts
    d = opt.update(0.5, LinkSample("T1", 32, 0.0, EARLY_SHORT * 32, 0, 10_000, moved=700_000))
    assert d.active == 128
    assert d.reason.startswith("short files (168 ended in 0.5 s): slow start x4: 1.4 MB/s at 32")
    assert d.ask_in == 0.75
    long_ = AdaptiveConcurrency(1, 16, start=8)
    long_.update(0.0, LinkSample("T1", 8, 0, 0, 0, 100, moved=0))
    d = long_.update(1.5, LinkSample("T1", 8, 1e8, 3, 0, 100, moved=150_000_000))
    assert d.active == 8 and d.ask_in == 1.5        # long transfers: full intervals


def test_long_transfers_keep_doubling_with_a_settle_sample():
    """Few completions per interval (bulk files): slow start doubles, as before."""
    opt = AdaptiveConcurrency(1, 128, start=8)
    history = run(opt, lambda n: min(n, 20) * 5 * MB, seconds=12, counter=True)
    changes = [r for (_, p, _), (_, c, r) in itertools.pairwise(history) if c != p]
    assert changes and changes[0].startswith("slow start") and "trying 16" in changes[0]
    assert not any(r.startswith("short files") for r in changes)
