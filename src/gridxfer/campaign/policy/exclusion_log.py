"""Exclusions in the journal: which endpoints became excluded or were readmitted since the
last look (``exclusion_changes``), the ``detail`` of their ``excluded``/``readmitted``
events (``exclusion_event``), and the exclusions in force read back from those events
(``current_exclusions``, for ``campaign status``). The rules themselves: ``exclusions.py``.
"""
from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gridxfer.campaign.policy.selection import Exclusion


def exclusion_event(tier: str, exc: Exclusion | None, url: str) -> dict[str, Any]:
    """The ``detail`` of an ``excluded``/``readmitted`` journal event."""
    if exc is None:
        return {"tier": tier, "url": url}
    return {"tier": tier, "url": url, "reason": exc.reason, "until": exc.until}


def exclusion_changes(before: dict[str, Exclusion], after: Sequence[Exclusion]
                      ) -> tuple[list[Exclusion], list[str]]:
    """Which endpoints became excluded and which were readmitted since ``before``.

    A change of reason (e.g. open -> half-open) counts as newly excluded."""
    now = {e.url: e for e in after}
    added = [e for u, e in now.items()
             if u not in before or before[u].reason.split(";")[0] != e.reason.split(";")[0]]
    removed = [u for u in before if u not in now]
    return added, removed


@dataclass(frozen=True)
class ExcludedEndpoint:
    tier: str
    url: str
    reason: str
    since: float                # when this exclusion (with this reason) was journalled
    until: float | None         # when it is re-probed; None = until further notice


def current_exclusions(conn: sqlite3.Connection) -> list[ExcludedEndpoint]:
    """Endpoints whose latest ``excluded``/``readmitted`` journal event is ``excluded``."""
    latest: dict[tuple[str, str], ExcludedEndpoint | None] = {}
    for row in conn.execute("SELECT ts, kind, detail FROM events "
                            "WHERE kind IN ('excluded', 'readmitted') ORDER BY id"):
        d = json.loads(row[2])
        key = (str(d.get("tier", "?")), str(d.get("url", "?")))
        latest[key] = (ExcludedEndpoint(key[0], key[1], str(d.get("reason", "")), float(row[0]),
                                        d.get("until")) if row[1] == "excluded" else None)
    return [e for _, e in sorted(latest.items()) if e is not None]
