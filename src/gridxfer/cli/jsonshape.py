"""The one ``--json`` shape, ``"schema": 1``, of ``campaign run``/``resume``, ``status``,
``report`` and ``list`` (a list of status documents, each with ``error``: null, or why the
journal is unreadable or unplanned); pinned by ``tests/contract/test_json_schema.py``,
documented in the README.

Every kind has the same top-level keys; what only one kind has sits under its own key::

    schema        1 (raised only when a key changes meaning or goes away)
    kind          "run" | "status" | "report"
    campaign, state, journal (null for a dry run)
    times         {created, updated, started, ended}: ISO 8601 UTC ("...Z") or null
    files         {total, done, failed, pending, active, cancelled}
    bytes         {total, done, failed, pending, active}
    tiers         {tier: {total, done, failed, pending, active}} (files)
    endpoints     {url: name} (journal/names.py)
    failed_files  [{name, tier, endpoint (its name), url, error_class, error_msg, attempts}]
    filters       {tier, endpoint, failed, since} (status/report filters; null when unset)
    job_metadata  FTS3's job_metadata from the campaign file, or null
    run           {dry_run, seconds, mean_rate, recovered, cleaned, paused, edited,
                   reloaded, plan (--dry-run: pairs, tiers, probes)}            (kind run)
    status        {links, excluded, paused, tape}                               (kind status)
    report        {seconds, rate, links, endpoints, histogram, share, tape, png} (kind report)

Rates are bytes/s, sizes bytes, durations seconds; every point in time is ISO 8601.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

SCHEMA = 1
FILE_KEYS = ("total", "done", "failed", "pending", "active")
_TIME_KEYS = frozenset({"since", "until", "created", "updated", "started", "ended", "t0"})


def iso(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def _times(obj: Any) -> Any:
    """Every point in time (a key of ``_TIME_KEYS`` holding a number) as ISO 8601."""
    if isinstance(obj, dict):
        return {k: iso(v) if k in _TIME_KEYS and isinstance(v, int | float)
                and not isinstance(v, bool) else _times(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_times(v) for v in obj]
    return obj


def _counts(by_state: dict[str, int]) -> dict[str, int]:
    out = {k: int(by_state.get(k, 0)) for k in FILE_KEYS[1:]}
    return {"total": sum(int(v) for v in by_state.values()), **out}


def _failed(rows: Any, names: dict[str, str]) -> list[dict[str, Any]]:
    from gridxfer.campaign.journal.names import name_of
    return [{"name": r["name"], "tier": r["tier"],
             "endpoint": name_of(names, r["endpoint"]) if r.get("endpoint") else None,
             "url": r.get("endpoint"), "error_class": r.get("error_class"),
             "error_msg": r.get("error_msg"), "attempts": r.get("attempts")} for r in rows]


def _filters(f: Any) -> dict[str, Any]:
    return {"tier": f.tier, "endpoint": f.endpoint, "failed": f.failed, "since": iso(f.since)}


def _common(kind: str, st: Any, *, job_metadata: Any = None) -> dict[str, Any]:
    files = _counts(st.files)
    files["cancelled"] = st.cancelled
    return {"schema": SCHEMA, "kind": kind, "campaign": st.name, "state": st.state,
            "journal": st.journal or None,
            "times": {"created": iso(st.created), "updated": iso(st.updated),
                      "started": iso(st.started), "ended": iso(st.ended)},
            "files": files, "bytes": _counts(st.bytes),
            "tiers": {t: _counts(by) for t, by in sorted(st.tiers.items())},
            "endpoints": dict(st.names), "failed_files": _failed(st.failed_files, st.names),
            "filters": _filters(st.filters), "job_metadata": job_metadata,
            "run": None, "status": None, "report": None}


def status(st: Any) -> dict[str, Any]:
    d = _common("status", st)
    d["status"] = _times({"links": list(st.links), "excluded": list(st.excluded),
                          "paused": list(getattr(st, "paused", ())),
                          "tape": st.tape.to_dict() if st.tape is not None else None})
    return d


def listing(items: Any) -> list[dict[str, Any]]:
    """``campaign list --json``: one status document per journal, plus ``error``."""
    return [{**status(st), "error": st.error or None} for st in items]


def run(result: Any, st: Any | None) -> dict[str, Any]:
    """``st``: the journal's status after the run (None for a dry run: nothing journalled)."""
    extra = {"dry_run": result.dry_run, "seconds": result.seconds,
             "mean_rate": result.mean_rate, "recovered": result.recovered,
             "cleaned": result.cleaned, "paused": result.paused or None,
             "edited": result.edited, "reloaded": result.reloaded,
             "plan": asdict(result.plan) if getattr(result, "plan", None) else None}
    if st is None:
        from gridxfer.campaign.report.filters import Filters
        from gridxfer.campaign.report.status import CampaignStatus
        pending = result.files_total - result.files_done - result.files_failed
        st = CampaignStatus(result.name, "", result.state,
                            {"done": result.files_done, "failed": result.files_failed,
                             "pending": pending}, {"done": result.bytes_done,
                                                   "pending": result.bytes_total
                                                   - result.bytes_done}, {},
                            filters=Filters())
    d = _common("run", st)
    d["run"] = extra
    return d


def report(rep: Any, st: Any, png: str | None) -> dict[str, Any]:
    from gridxfer.campaign.journal.names import name_of

    def group(g: Any, endpoint: bool) -> dict[str, Any]:
        return {"tier": g.tier, "endpoint": name_of(rep.names, g.key) if endpoint else None,
                "url": g.key if endpoint else None,
                "files": {"done": g.files_done, "failed": g.files_failed},
                "transfers": g.transfers, "bytes": g.bytes,
                "rate": {"mean": g.mean_rate, "min": g.min_rate, "max": g.max_rate,
                         "stddev": g.stddev_rate},
                "failed_attempts": dict(g.failures)}

    share = asdict(rep.share)
    for e in share["endpoints"]:
        e["url"], e["endpoint"] = e["endpoint"], name_of(rep.names, e["endpoint"])
    for b in share["bins"]:
        for k in ("files", "bytes", "sessions"):
            b[k] = {name_of(rep.names, u): v for u, v in b[k].items()}
    d = _common("report", st, job_metadata=rep.job_metadata)
    d["report"] = _times({
        "seconds": rep.seconds, "rate": rep.rate,
        "links": [group(g, False) for g in rep.links],
        "endpoints": [group(g, True) for g in rep.endpoints],
        "histogram": [asdict(b) for b in rep.histogram], "share": share,
        "tape": rep.tape.to_dict() if rep.tape is not None else None, "png": png})
    return d


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, default=str)
