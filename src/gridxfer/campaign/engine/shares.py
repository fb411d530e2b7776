"""FTS3's activity shares: each link's slots divided between the activities of the files
waiting on it, by weight (``activity_shares: {Express: 3, default: 1}``).

Which activity goes next on a link: among those with a file ready, the one whose transfers
in flight on that link, plus this one, make the smallest part of its weight
(``(in_flight + 1) / weight``; the larger weight wins a tie). So with every activity busy a
link of 4 slots runs 3 Express and 1 default; an activity with nothing waiting leaves its
slots to the others, as FTS3 does. A file's activity is its own (``files: [{name, activity}]``),
else the campaign's ``activity``; an activity without a share of its own gets the share of
``default`` (1 when none is given), as in FTS3.
"""
from __future__ import annotations

from collections.abc import Iterable

from gridxfer.campaign.spec.model import CampaignSpec

DEFAULT = "default"


class ActivityShares:
    def __init__(self, spec: CampaignSpec) -> None:
        self._of = {f.name: f.activity for f in spec.source.files if f.activity}
        self._default = spec.activity
        self._weights = dict(spec.activity_shares)
        names = {self._default, *self._of.values()}
        self.active = bool(self._weights) and len(names) > 1    # else: one queue, as before
        self.activities = tuple(sorted(names))
        self._in_flight: dict[tuple[str, str], int] = {}

    def of(self, name: str) -> str:
        return self._of.get(name, self._default)

    def weight(self, activity: str) -> float:
        return self._weights.get(activity, self._weights.get(DEFAULT, 1.0))

    def pick(self, tier: str, ready: Iterable[str]) -> str | None:
        """The activity the link's next slot goes to, or None when nothing is ready."""
        best: tuple[float, float, str] | None = None
        for act in ready:
            w = self.weight(act)
            key = ((self._in_flight.get((tier, act), 0) + 1) / w, -w, act)
            if best is None or key < best:
                best = key
        return best[2] if best else None

    def started(self, tier: str, name: str) -> None:
        key = (tier, self.of(name))
        self._in_flight[key] = self._in_flight.get(key, 0) + 1

    def ended(self, tier: str, name: str) -> None:
        key = (tier, self.of(name))
        self._in_flight[key] = max(0, self._in_flight.get(key, 0) - 1)

    def in_flight(self, tier: str) -> dict[str, int]:
        return {a: n for (t, a), n in self._in_flight.items() if t == tier and n}
