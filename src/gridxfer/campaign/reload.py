"""``resume`` and an edited campaign file: what changed since the journal was planned,
which changes a started campaign can take (applied by ``resume --reload``), and why the
others cannot be.

Safe: ``overwrite``, ``retries``, ``timeout``, each tier's concurrency (``max_active``,
``min_active``, ``streams``, ``tcp_buffer``), tokens, ``job_metadata``, and what only the
dispatcher reads (a tier's ``selector`` and ``priority``, ``circuit_breaker``,
``on_pool_down``, ``activity``, ``activity_shares``): they act on the transfers still to
come. Every other change is refused with its reason (the journal's files were planned from
the old source, tiers and priorities; done files were verified the old way): start again
with ``gridxfer campaign run FILE --replace``.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gridxfer.errors import GridxferError, UsageError
from gridxfer.campaign.journal import store as journal
from gridxfer.campaign.journal.check import JournalUnusable, reading
from gridxfer.campaign.spec.model import CampaignSpec, spec_from_dict, spec_to_dict
from gridxfer.campaign.spec.schema import load_spec

_SAFE = re.compile(r"overwrite|retries\..*|timeout|job_metadata|.*token.*|"
                   r"circuit_breaker\..*|pool_down_wait|activity|activity_shares.*|"
                   r"destinations\[[^\]]*\]\.(max_active|min_active|streams|tcp_buffer|"
                   r"selector|priority)")
_REASONS = (
    (re.compile(r"source\..*"), "the journal's files were planned from the old source"),
    (re.compile(r"destinations\[[^\]]*\]"), "a tier added or removed: its files are not "
                                           "planned, or are planned for no tier"),
    (re.compile(r"destinations\[[^\]]*\]\.pool"), "files in flight, done or to be cleaned "
                                                 "up are placed on the old pool"),
    (re.compile(r"checksum\..*"), "the files already done were verified the old way"),
    (re.compile(r"name"), "the file now names another campaign (another journal)"),
    (re.compile(r"priority"), "the journal's files were planned in the old priority order"),
    (re.compile(r"third_party"), "transfers in flight and their temporary names follow the "
                                 "old mode"),
)
_IGNORED = ("path", "inventory")
AGAIN = "start again with `gridxfer campaign run FILE --replace`"


@dataclass(frozen=True)
class Change:
    field: str          # dotted: overwrite, retries.max, destinations[T1].max_active
    old: Any
    new: Any
    reason: str = ""    # why a started campaign cannot take it ("" = safe)

    @property
    def safe(self) -> bool:
        return not self.reason

    def line(self) -> str:
        text = f"{self.field}: {_show(self.old)} -> {_show(self.new)}"
        return text if self.safe else f"{text} (refused: {self.reason})"


@dataclass(frozen=True)
class Edited:
    """The campaign file next to a journal, compared with the spec the journal holds."""
    path: str
    changes: tuple[Change, ...] = ()
    spec: CampaignSpec | None = None    # the file's spec (None: it could not be read)
    error: str | None = None            # why it could not be read

    @property
    def refused(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if not c.safe)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "error": self.error,
                "changes": [{"field": c.field, "old": c.old, "new": c.new, "safe": c.safe,
                             "reason": c.reason or None} for c in self.changes]}


class ReloadRefused(UsageError):
    """``resume --reload`` met changes a started campaign cannot take (exit 2)."""

    def __init__(self, name: str, edited: Edited) -> None:
        self.edited = edited
        super().__init__(f"campaign {name}: {edited.path} has {len(edited.refused)} change(s) "
                         f"a started campaign cannot take; nothing was applied; undo them or "
                         f"{AGAIN}")

    def lines(self) -> list[str]:
        return [str(self), *(f"  {c.line()}" for c in self.edited.refused)]


def compare(stored: CampaignSpec, spec_path: str | None) -> Edited | None:
    """The edits of ``spec_path`` against the journal's spec; None when there is no file
    to compare (a spec built in Python) or nothing changed."""
    if not spec_path:
        return None
    try:
        new = load_spec(spec_path)
    except GridxferError as exc:
        return Edited(spec_path, error=exc.lines()[0])
    changes = diff(stored, new)
    return Edited(spec_path, changes, new) if changes else None


def diff(old: CampaignSpec, new: CampaignSpec) -> tuple[Change, ...]:
    a, b = _flat(old), _flat(new)
    ta, tb = ({t.name for t in s.destinations} for s in (old, new))
    out = [Change(f"destinations[{t}]", "a tier" if t in ta else None,
                  "a tier" if t in tb else None, _reason(f"destinations[{t}]"))
           for t in sorted(ta ^ tb)]
    gone = tuple(f"destinations[{t}]." for t in ta ^ tb)
    for key in sorted(a.keys() | b.keys()):
        if a.get(key) != b.get(key) and not key.startswith(gone):
            out.append(Change(key, a.get(key), b.get(key), _reason(key)))
    return tuple(sorted(out, key=lambda c: c.field))


def apply(conn: Any, name: str, edited: Edited) -> CampaignSpec:
    """Store the file's spec in the journal (``resume --reload``), or refuse it whole."""
    if edited.error is not None or edited.spec is None:
        raise UsageError(f"campaign {name}: --reload: {edited.error}")
    if edited.refused:
        raise ReloadRefused(name, edited)
    journal.set_meta(conn, [("spec", json.dumps(spec_to_dict(edited.spec), sort_keys=True))])
    if edited.spec.job_metadata is not None:
        journal.set_meta(conn, [("job_metadata", edited.spec.job_metadata)])
    journal.add_event(conn, "reloaded", path=edited.path,
                      changes={c.field: [c.old, c.new] for c in edited.changes})
    return spec_from_dict(spec_to_dict(edited.spec))


def _flat(spec: CampaignSpec) -> dict[str, Any]:
    d = spec_to_dict(spec)
    for key in _IGNORED:
        d.pop(key, None)
    d["destinations"] = {t.pop("name"): t for t in d["destinations"]}
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any, depth: int) -> None:
        if isinstance(value, dict) and depth < 4 and value:
            for k, v in value.items():
                key = (f"{prefix}[{k}]" if prefix == "destinations"
                       else f"{prefix}.{k}" if prefix else str(k))
                walk(key, v, depth + 1)
        else:
            out[prefix] = list(value) if isinstance(value, tuple) else value
    walk("", d, 0)
    return out


def _reason(key: str) -> str:
    if _SAFE.fullmatch(key):
        return ""
    for pattern, why in reversed(_REASONS):     # the most specific first
        if pattern.fullmatch(key):
            return f"{why}; {AGAIN}"
    return f"not applied to a started campaign; {AGAIN}"


def _show(value: Any) -> str:
    if value is None:
        return "(none)"
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def journal_file(meta: dict[str, str]) -> str | None:
    """The campaign file a journal was planned from, if it is still there."""
    path = meta.get("spec_path") or ""
    return path if path and Path(path).is_file() else None


def journal_spec(path: Path, meta: dict[str, str]) -> CampaignSpec:
    """The campaign spec stored in a journal, or one line saying why there is none."""
    if not meta:                        # stopped while planning: check.unplanned
        raise JournalUnusable(f"{path}: the campaign was stopped while planning, nothing "
                              f"was planned; `gridxfer campaign run FILE` starts it again")
    if "spec" not in meta:
        raise JournalUnusable(f"{path}: the journal holds no campaign spec; "
                              f"start it again with `gridxfer campaign run FILE --replace`")
    try:
        return spec_from_dict(json.loads(meta["spec"]))
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise JournalUnusable(f"{path}: the journal's campaign spec is damaged "
                              f"({type(exc).__name__}: {str(exc)[:80]})") from None


def campaign_edits(name: str) -> Edited | None:
    """The campaign file's edits against the journal's spec, read-only (for a preview)."""
    path = journal.journal_path(name)
    conn = journal.connect(path, readonly=True)
    try:
        with reading(path):
            meta = journal.get_meta(conn)
    finally:
        conn.close()
    return edits(name, meta, journal_spec(path, meta))


def edits(name: str, meta: dict[str, str], spec: CampaignSpec,
          reload: bool = False) -> Edited | None:
    """How the campaign file differs from the journal's spec (None: no file, no change)."""
    found = journal_file(meta)
    if reload and found is None:
        raise UsageError(f"campaign {name}: --reload: the campaign file "
                         f"{meta.get('spec_path') or '(none recorded)'} is not there")
    return compare(spec, found)
