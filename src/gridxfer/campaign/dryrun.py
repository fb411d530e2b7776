"""What ``campaign run --dry-run`` shows: the plan (the first source -> destination pairs in
dispatch order, files and bytes per tier, names gridxfer refuses) and one probe of every
endpoint (``probes.py``: reachable, writable, free space, with the tokens a run would
carry), with those a run could not use flagged. What a dry run refuses as a run does is
``preflight.py``'s.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gridxfer.movers import names
from gridxfer.campaign import probes as probes_mod
from gridxfer.campaign.probes import Probe
from gridxfer.campaign.engine.credentials import Credentials
from gridxfer.campaign.engine.shares import ActivityShares
from gridxfer.campaign.engine.factories import default_mover_factory, default_ops_factory
from gridxfer.campaign.spec.dataset import DatasetEntry, refusal
from gridxfer.campaign.spec.model import CampaignSpec, by_priority

PAIRS = 10                  # pairs shown by default


@dataclass(frozen=True)
class TierPlan:
    tier: str
    priority: int
    endpoints: int
    files: int
    bytes: int
    bad_names: int              # refused names: a run plans them failed (bad_name)
    activities: tuple[tuple[str, int], ...] = ()    # files per activity, with shares set


@dataclass(frozen=True)
class Plan:
    pairs: tuple[tuple[str, str, str], ...]     # (tier, source URL, destination URL)
    tiers: tuple[TierPlan, ...]
    probes: tuple[Probe, ...]
    existing: tuple[str, ...] = ()      # shown destinations already there (overwrite off)
    refused: tuple[tuple[str, str, str], ...] = ()  # the first (tier, name, why) refused

    @property
    def flagged(self) -> tuple[Probe, ...]:
        return tuple(p for p in self.probes if p.problem)

    @property
    def dead_tiers(self) -> tuple[str, ...]:
        """Tiers none of whose endpoints a run could use (their files would all fail)."""
        out = []
        for t in self.tiers:
            mine = [p for p in self.probes if p.role == t.tier]
            if mine and all(p.problem for p in mine):
                out.append(t.tier)
        return tuple(out)


def make_plan(spec: CampaignSpec, entries: Iterable[DatasetEntry], *, pairs: int = PAIRS,
              probe: bool = True, ops_factory: Callable | None = None,
              mover_factory: Callable | None = None) -> Plan:
    tiers = by_priority(spec.destinations)
    shares = ActivityShares(spec)
    per_activity: dict[str, int] = {}
    n = size = 0
    bad = dict.fromkeys((t.name for t in tiers), 0)
    refused: list[tuple[str, str, str]] = []
    first: list[DatasetEntry] = []
    for e in entries:
        n, size = n + 1, size + e.size
        for t in tiers:
            why = refusal(e, t.pool)
            if why is not None:
                bad[t.name] += 1
                if len(refused) < pairs:
                    refused.append((t.name, e.name, why))
        if shares.active:
            act = shares.of(e.name)
            per_activity[act] = per_activity.get(act, 0) + 1
        if len(first) < pairs:
            first.append(e)
    shown = tuple((t.name, e.src_url, names.join_url(t.pool[0], e.name, check=False))
                  for e in first for t in tiers)[:pairs]
    acts = tuple(sorted(per_activity.items()))
    plans = tuple(TierPlan(t.name, t.priority, len(t.pool), n, size, bad[t.name], acts)
                  for t in tiers)
    probes: tuple[Probe, ...] = ()
    existing: tuple[str, ...] = ()
    if probe:
        ops = ops_factory or default_ops_factory
        creds = Credentials(spec)
        grants = probes_mod.grants_for(spec, creds)
        probes = probes_mod.probe_all(spec, size, ops, mover_factory or default_mover_factory,
                                      creds, grants)
        if not spec.overwrite:
            ok = {p.url for p in probes if not p.problem}
            existing = probes_mod.existing(
                [(d, grants[(t, spec.tier(t).pool[0])].tokens)
                 for t, _, d in shown if spec.tier(t).pool[0] in ok], ops)
    return Plan(shown, plans, probes, existing, tuple(refused))


