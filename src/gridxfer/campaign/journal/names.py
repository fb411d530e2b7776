"""One name per destination endpoint, journalled so every view shows the same one.

A name is, in this order: the ``name:`` a pool entry gives in the campaign file, the
testbed inventory name the campaign file used for it (``t1a-xrd1``, or ``t1a-xrd1/sub``),
else the shortest form of its URL that no other endpoint of the campaign shares:

    se01 (first label of the host) -> se01.cnaf.example -> se01.cnaf.example:1094
    -> se01.cnaf.example:1094/data (then more of the path) -> the whole URL

``file://`` URLs are named by the end of their path (``a``, ``dst/a``, ...). Every form is
taken from the redacted URL, so no credential reaches a name. ``plan`` stores the map in
the journal's ``meta`` (``endpoint_names``, JSON ``{url: name}``); ``read`` returns it,
and names endpoints that an older journal has no entry for the same way, so the status,
the report, the PNG, the live view and the Nagios perfdata all agree.
"""
from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from gridxfer.redact import redact

META_KEY = "endpoint_names"
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,47}(/[A-Za-z0-9._-]{1,64})*")


def _forms(url: str) -> list[str]:
    """Candidate names for ``url``, shortest first; the last is the whole (redacted) URL."""
    text = redact(url)
    p = urlsplit(text)
    parts = [s for s in p.path.split("/") if s]
    tails = ["/".join(parts[-k:]) for k in range(1, len(parts) + 1)]
    if p.scheme == "file" or not p.hostname:
        return [*tails, text.rstrip("/") or text]
    host = p.hostname
    ip = bool(re.fullmatch(r"[0-9.]+|[0-9a-fA-F:]+", host))
    hostport = f"{host}:{p.port}" if p.port else host
    out = [] if ip else [host.split(".")[0]]
    out += [host, hostport] + [f"{hostport}/{t}" for t in tails]
    out += [f"{p.scheme}://{hostport}/{'/'.join(parts)}", text.rstrip("/") or text]
    return list(dict.fromkeys(f for f in out if f))


def assign(urls: Iterable[str], given: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{url: name}`` for ``urls``: given names kept, the others their shortest form that
    names no other URL (and is no given name); unique, whatever the URLs."""
    given = dict(given or {})
    every = list(dict.fromkeys([*given, *urls]))
    todo = [u for u in every if u not in given]
    forms = {u: _forms(u) for u in every}
    taken = set(given.values())
    out = dict(given)
    for u in todo:
        others = {f for v in every if v != u for f in forms[v]}
        pick = next((f for f in forms[u] if f not in others and f not in taken), None)
        out[u] = pick if pick is not None else forms[u][-1]
        taken.add(out[u])
    seen: dict[str, str] = {}
    for u, n in list(out.items()):          # a clash left (URLs that redact alike): number it
        if n in seen:
            i = 2
            while f"{n}#{i}" in seen:
                i += 1
            out[u] = f"{n}#{i}"
        seen[out[u]] = u
    return out


def meta_item(names: Mapping[str, str]) -> tuple[str, str]:
    """The ``meta`` row that journals ``names`` (``store.plan`` writes it with the rest)."""
    return META_KEY, json.dumps(dict(names), sort_keys=True)


def read(conn: sqlite3.Connection) -> dict[str, str]:
    """The journal's names; a journal planned before names were journalled gets a name for
    each endpoint of its rows (one scan; with the map there is none: ``status`` stays on
    its indexes, ``name_of`` names a URL the map lacks)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (META_KEY,)).fetchone()
    stored: dict[str, str] = {}
    if row is not None:
        try:
            raw = json.loads(row[0])
        except ValueError:
            raw = {}
        if isinstance(raw, dict):
            stored = {str(k): str(v) for k, v in raw.items()
                      if isinstance(v, str) and NAME_RE.fullmatch(v) or _is_form(str(k), v)}
    if row is not None and stored:
        return stored           # planned with the map: its pool's URLs are every endpoint
    seen = [r[0] for r in conn.execute(
        "SELECT DISTINCT endpoint FROM files WHERE endpoint IS NOT NULL "
        "UNION SELECT DISTINCT endpoint FROM attempts")]
    missing = [u for u in seen if u not in stored]
    if not missing:
        return stored
    return assign([*stored, *missing], stored)


def _is_form(url: str, name: object) -> bool:
    """A stored name that is one of the URL's own short forms (IP hosts, ports, paths)."""
    return isinstance(name, str) and name in _forms(url)


def name_of(names: Mapping[str, str], url: str) -> str:
    """The endpoint's name; a URL no map knows is shown by its shortest own form."""
    return names.get(url) or assign([*names, url], names)[url]
