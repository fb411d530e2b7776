"""The optimizers in the journal: the ``detail`` of an ``optimizer`` event (a decision and
the sample it was made on: ``decision_event``), and each link's concurrency read back from
those events (``link_status``, for ``campaign status``). The decisions themselves:
``optimizer.py``.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from gridxfer.campaign.policy.optimizer import Decision, LinkSample


def decision_event(link: LinkSample, previous: int, decision: Decision) -> dict[str, Any]:
    """The ``detail`` of an ``optimizer`` journal event:
    ``journal.add_event(conn, "optimizer", **decision_event(...))``."""
    return {"tier": link.tier, "active": decision.active, "previous": previous,
            "reason": decision.reason, "rate": round(link.rate, 1), "in_flight": link.active,
            "queued": link.queued, "succeeded": link.succeeded, "failed": link.failed}


@dataclass(frozen=True)
class LinkState:
    tier: str
    active: int
    reason: str
    since: float
    decisions: int


def link_status(conn: sqlite3.Connection) -> list[LinkState]:
    """Current concurrency per link and why: the latest ``optimizer`` event per tier."""
    latest: dict[str, LinkState] = {}
    for row in conn.execute("SELECT ts, detail FROM events WHERE kind = 'optimizer' ORDER BY id"):
        d = json.loads(row["detail"])
        tier = str(d.get("tier", "?"))
        n = latest[tier].decisions + 1 if tier in latest else 1
        latest[tier] = LinkState(tier, int(d.get("active", 0)), str(d.get("reason", "")),
                                 float(row["ts"]), n)
    return [latest[t] for t in sorted(latest)]
