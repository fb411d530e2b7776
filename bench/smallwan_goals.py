"""bench.smallwan's verdicts: its ratios to xrdcp --parallel 32 by the medians, a peer's
rounds that stalled on xrootd's kXR_wait left out (so no goal is met on a peer's stall),
the issue's goals (issue 21) and the davs reference line, which is not one of them.
"""
from __future__ import annotations

import statistics

from bench.common import Result
from bench.record import Goal

STALL = 2.0     # a peer round this many times its fastest one waited on kXR_wait
MEDIANS = "medians; peer rounds stalled on kXR_wait left out"


def clean_median(r: Result, limit: float | None = None) -> float | None:
    """The median of ``r``'s rounds without a stall (None: every round stalled or failed).
    xrootd answers a checksum query past its ``xrootd.chksum max`` jobs with ``kXR_wait
    30``: `xrdcp --cksum` rounds of 5 s then take 35-61 s, which measures xrootd's queue,
    not the copy. A round over ``STALL`` x the fastest, or over ``limit`` (``STALL`` x the
    same peer without checksum: when every round stalled the fastest one did too), is
    left out, so a goal is never met on a peer's stall."""
    rounds = sorted(s for s in r.round_seconds if s)
    if not rounds:
        return None
    cap = STALL * rounds[0] if limit is None else min(STALL * rounds[0], limit)
    clean = [s for s in rounds if s <= cap]
    return statistics.median(clean) if clean else None


def stall_limit(results: dict, label: str, cks: bool) -> float | None:
    """``STALL`` x xrdcp-32's clean median without checksum, for the checksum rounds."""
    base = results.get((label, False), {}).get("xrdcp-32") if cks else None
    m = clean_median(base) if base else None
    return STALL * m if m else None


def med_ratio(a: Result | None, b: Result | None, limit: float | None = None) -> float:
    """files/s of ``a`` over the peer ``b``: ``a``'s median round, ``b``'s median round
    without stalls (``clean_median``); 0 if either failed or every peer round stalled."""
    peer = clean_median(b, limit) if b else None
    if not a or not a.median_seconds or not peer:
        return 0.0
    return peer / a.median_seconds


def davs_references(results: dict) -> list[str]:
    """gx-davs-32 against gfal-davs-32 by the medians, per set and checksum mode: the
    issue asks for the davs figures beside the XRootD ones, without a goal of their own."""
    out = []
    for (label, cks), res in results.items():
        gx, gfal = res.get("gx-davs-32"), res.get("gfal-davs-32")
        if gx is None or gfal is None:
            continue
        x = (gfal.median_seconds / gx.median_seconds
             if gx.median_seconds and gfal.median_seconds else 0.0)
        out.append(f"reference (not a goal): {label}, checksum {'adler32' if cks else 'none'}:"
                   f" gx-davs-32 = {x:.2f}x gfal-copy (32 processes), by the medians")
    return out


def goals_of(results: dict, probes: list[dict]) -> list[Goal]:
    """The issue's goals that this run measured (a tool left out leaves its goal out)."""
    goals = []
    for (label, cks), res in results.items():
        g32, auto, x32 = res.get("gx-32"), res.get("gx-auto"), res.get("xrdcp-32")
        tag = f"{label}, checksum {'adler32' if cks else 'none'}"
        limit = stall_limit(results, label, cks)
        if x32 is None or clean_median(x32, limit) is None:
            continue                    # no peer, or no peer round without a stall
        if label == "4KB" and g32 is not None:
            goals.append(Goal(f"{tag}: gx-32 >= 1.3x xrdcp --parallel 32 ({MEDIANS})",
                              med_ratio(g32, x32, limit), 1.3, unit="x"))
        if label == "4KB" and not cks and auto is not None:
            goals.append(Goal(f"{tag}: gx-auto >= 2x xrdcp --parallel 32 ({MEDIANS})",
                              med_ratio(auto, x32, limit), 2.0, unit="x"))
        if label == "1MB" and not cks and g32 is not None:
            goals.append(Goal(f"{tag}: gx-32 >= 1.2x xrdcp --parallel 32 ({MEDIANS})",
                              med_ratio(g32, x32, limit), 1.2, unit="x"))
    for p in probes:
        if p["tool"] == "gx-32":
            limit = 3.5 if p["checksum"] else 2.5
            goals.append(Goal(f"round trips per file, checksum "
                              f"{'adler32' if p['checksum'] else 'none'} <= {limit}",
                              p["round_trips_per_file"], limit, at_most=True))
    return goals
