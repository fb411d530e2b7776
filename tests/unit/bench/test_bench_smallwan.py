"""bench.smallwan's ratios: a peer's rounds that stalled on xrootd's kXR_wait are left out of
its median, so no goal is met on a peer's stall (an xrdcp --cksum round of 5 s took 35-61 s)."""
from __future__ import annotations

from bench.common import Result
from bench.smallwan_goals import clean_median, goals_of, med_ratio


def res(tool: str, *rounds: float | None) -> Result:
    ok = [r for r in rounds if r]
    return Result(tool, min(ok, default=0.0), 2000, 2000 * 4096, ok=bool(ok),
                  rounds=tuple(rounds), median=sorted(ok)[len(ok) // 2] if ok else None)


def test_a_stalled_round_is_left_out_of_the_peers_median():
    assert clean_median(res("xrdcp-32", 5.5, 31.1, 5.4)) == 5.45
    assert clean_median(res("xrdcp-32", 4.2, 4.1, 4.3)) == 4.2
    assert clean_median(res("xrdcp-32", None)) is None
    # every round stalled: only the same peer without checksum shows it
    assert clean_median(res("xrdcp-32", 61.1, None, 32.1)) == 46.6
    assert clean_median(res("xrdcp-32", 61.1, None, 32.1), limit=2 * 4.2) is None


def test_the_goal_uses_the_clean_median_and_is_left_out_when_every_peer_round_stalled():
    gx, peer = res("gx-32", 4.4, 4.5, 4.5), res("xrdcp-32", 5.5, 31.1, 5.4)
    plain = {"gx-32": res("gx-32", 3.1, 3.2, 3.1), "xrdcp-32": res("xrdcp-32", 4.2, 4.1, 4.2)}
    assert round(med_ratio(gx, peer), 3) == round(5.45 / 4.5, 3)      # 1.21x, not 6.9x
    goals = goals_of({("4KB", False): plain, ("4KB", True): {"gx-32": gx, "xrdcp-32": peer}},
                     [])
    cks = [g for g in goals if "adler32" in g.label]
    assert len(cks) == 1 and not cks[0].met and "stalled" in cks[0].label
    stalled = res("xrdcp-32", 61.1, None, 32.1)
    goals = goals_of({("4KB", False): plain, ("4KB", True): {"gx-32": gx, "xrdcp-32": stalled}},
                     [])
    assert [g for g in goals if "adler32" in g.label] == []            # not measured: no goal
