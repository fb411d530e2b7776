"""The concurrency ceiling of a tier whose campaign file gives no ``max_active``.

``max_active`` is a ceiling the user may set; the optimizer (policy/optimizer.py) finds the
concurrency under it. Without it, the ceiling suits the tier's traffic, read from its files
in the journal when the run starts (their mean size):

=================  =======  ====================================================
mean file size     ceiling  why
=================  =======  ====================================================
up to 1 MiB        128      short transfers: the useful concurrency is the link's
                            bandwidth x RTT over the file size (1 Gbit/s x 20 ms
                            / 4 KB is 600), far above a bulk link's; 128 transfers
                            of 2 round trips each keep a 20 ms link busy at ~3,000
                            files/s, more than one Python process dispatches
up to 64 MiB       32       mid-size files: a few dozen fill a long fat link
larger             16       bulk: a handful of transfers fill a link; more only
                            adds sessions on the servers
=================  =======  ====================================================

Under a default ceiling the optimizer starts at a quarter of it, at least ``START_MAX``
(8): small files at 32, others at 8. It ramps up multiplicatively (x4 while transfers are
short, x2 otherwise) as long as the rate grows, so a bulk tier stays low and a small-file
tier climbs within seconds. The default ceilings of all tiers together stay within
``limits.MAX_ACTIVE_TOTAL`` (one worker thread each).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from gridxfer import limits
from gridxfer.campaign.spec.model import TierSpec

MiB = 1 << 20
CEILINGS = ((1 * MiB, 128), (64 * MiB, 32))
LARGE_CEILING = 16


def default_ceiling(mean_size: float) -> int:
    """The ceiling for a tier whose files average ``mean_size`` bytes."""
    for upto, ceiling in CEILINGS:
        if mean_size <= upto:
            return ceiling
    return LARGE_CEILING


def effective_tiers(tiers: Iterable[TierSpec],
                    tally: Mapping[str, Mapping[str, tuple[int, int]]]) -> tuple[TierSpec, ...]:
    """``tiers`` with each ``auto_ceiling`` tier's ``max_active`` set to its ceiling.
    ``tally``: ``journal.tally`` ({tier: {state: (files, bytes)}})."""
    tiers = tuple(tiers)
    given = sum(t.max_active for t in tiers if not t.auto_ceiling)
    auto = sum(1 for t in tiers if t.auto_ceiling)
    room = max(1, int(limits.MAX_ACTIVE_TOTAL.high - given) // max(1, auto))
    out = []
    for t in tiers:
        if not t.auto_ceiling:
            out.append(t)
            continue
        by = tally.get(t.name, {})
        files = sum(n for n, _ in by.values())
        mean = sum(b for _, b in by.values()) / files if files else 0.0
        out.append(replace(t, max_active=max(t.min_active, min(room, default_ceiling(mean)))))
    return tuple(out)
