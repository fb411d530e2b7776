"""``status`` and ``report`` filters: ``--tier``, ``--endpoint``, ``--failed``, ``--since``.

A filter narrows what one read-only journal connection sees: ``scope`` creates TEMP views
named ``files`` and ``attempts`` over the journal's tables (SQLite looks up ``temp``
before ``main``), so every query of the read side (status counts, the report's groups,
histogram, shares, tape, the PNG's timeline) is filtered the same way without a filtered
copy of each query. The journal itself is never written.

- ``tier``: exact tier name;
- ``endpoint``: an endpoint's name (``journal/names.py``) or URL, or a glob over either
  (``cnaf-*``); files not yet given a destination match no endpoint;
- ``failed``: files that failed for good, and failed attempts;
- ``since``: files updated and attempts started or ended at or after this time.
"""
from __future__ import annotations

import fnmatch
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from gridxfer.errors import UsageError
from gridxfer.campaign.journal import check as journalcheck
from gridxfer.campaign.journal import names as endpoint_names
from gridxfer.campaign.journal import store as journal


@dataclass(frozen=True)
class Filters:
    tier: str | None = None
    endpoint: str | None = None
    failed: bool = False
    since: float | None = None          # unix time

    def __bool__(self) -> bool:
        return bool(self.tier or self.endpoint or self.failed or self.since is not None)

    def endpoints(self, conn: sqlite3.Connection) -> list[str] | None:
        """The URLs ``endpoint`` matches (by name or URL); None without ``endpoint``."""
        if not self.endpoint:
            return None
        names = endpoint_names.read(conn)
        pat = self.endpoint
        return [u for u, n in names.items()
                if any(x == pat or x.rstrip("/") == pat.rstrip("/")
                       or fnmatch.fnmatchcase(x, pat) for x in (n, u))]


NO_FILTERS = Filters()


@contextmanager
def scoped(name: str, f: Filters) -> Iterator[tuple[sqlite3.Connection, dict[str, str]]]:
    """Campaign ``name``'s journal opened read-only under the damaged-journal guards, with
    ``f`` applied (``scope``): yields the connection and the endpoint names (URL -> name)."""
    path = journal.journal_path(name)
    conn = journal.connect(path, readonly=True)
    try:
        with journalcheck.reading(path):
            names = endpoint_names.read(conn)
            scope(conn, f)
            yield conn, names
    finally:
        conn.close()


def scope(conn: sqlite3.Connection, f: Filters) -> None:
    """Make ``files`` and ``attempts`` on ``conn`` the filtered rows (TEMP views)."""
    if not f:
        return
    urls = f.endpoints(conn)
    fw, aw = ["1"], ["1"]
    fp: list[str | float] = []
    ap: list[str | float] = []
    if f.tier:
        fw.append("tier = ?")
        aw.append("tier = ?")
        fp.append(f.tier)
        ap.append(f.tier)
    if urls is not None:
        marks = ",".join("?" * len(urls)) or "NULL"
        fw.append(f"endpoint IN ({marks})")
        aw.append(f"endpoint IN ({marks})")
        fp.extend(urls)
        ap.extend(urls)
    if f.failed:
        fw.append("state = 'failed'")
        aw.append("status = 'failed'")
    if f.since is not None:
        fw.append("updated >= ?")
        aw.append("coalesce(ended, started) >= ?")
        fp.append(f.since)
        ap.append(f.since)
    # a view cannot take parameters: the values are quoted by SQLite itself
    conn.execute("DROP VIEW IF EXISTS temp.files")
    conn.execute("DROP VIEW IF EXISTS temp.attempts")
    conn.execute(f"CREATE TEMP VIEW files AS SELECT * FROM main.files WHERE "
                 f"{_bind(conn, ' AND '.join(fw), fp)}")
    conn.execute(f"CREATE TEMP VIEW attempts AS SELECT * FROM main.attempts WHERE "
                 f"{_bind(conn, ' AND '.join(aw), ap)}")


def _bind(conn: sqlite3.Connection, sql: str, params: list) -> str:
    """``sql`` with each ``?`` replaced by SQLite's own literal for the value (``quote()``)."""
    parts = sql.split("?")
    if len(parts) - 1 != len(params):
        raise UsageError("internal: filter parameters do not match")
    out = [parts[0]]
    for value, rest in zip(params, parts[1:], strict=True):
        out.append(conn.execute("SELECT quote(?)", (value,)).fetchone()[0])
        out.append(rest)
    return "".join(out)
