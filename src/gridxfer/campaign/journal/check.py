"""Is this file a gridxfer journal, and what a failing journal means for the user.

``verify(path)`` reads (never writes) the schema of an existing file before
``journal.connect`` may write anything into it: an empty file, garbage, a truncated or
damaged database, or another program's SQLite file is refused with one line naming the
file (exit 2). ``reading(path)`` turns SQLite errors met later into the same kind of line:
a damaged journal is bad input (exit 2); a full disk, an I/O error or a locked database
is the environment (exit 1).
"""
from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path
from collections.abc import Iterator
from urllib.parse import quote

from gridxfer.campaign.journal import migrate
from gridxfer.errors import GridxferError, UsageError

# The columns every gridxfer journal has had (newer ones may be added by migrations).
CORE_COLUMNS = {
    "meta": {"key", "value"},
    "files": {"id", "name", "src_url", "size", "tier", "state"},
    "attempts": {"id", "file_id", "tier", "endpoint", "started", "status"},
    "events": {"id", "ts", "kind", "detail"},
}
# What a run writes and reads: every journal since the first release has these (the tape
# columns are added by ``migrate``). A damaged schema text that lost one is refused before
# anything is written (a byte flip once made resume write, then fail: "no such column").
WRITE_COLUMNS = {
    "files": CORE_COLUMNS["files"] | {"endpoint", "dst_url", "attempts", "checksum",
                                      "error_class", "error_msg", "not_before", "updated",
                                      "expected_checksum"},
    "attempts": CORE_COLUMNS["attempts"] | {"dst_url", "ended", "bytes", "rate", "streams",
                                            "mode", "error_class", "error_msg", "tmp_url"},
}
CHECKS = {"files": (migrate.STATES, migrate.OLD_STATES),
          "attempts": ("('active','ok','failed','cancelled')",)}
_ENVIRONMENT = ("disk is full", "disk i/o error", "database is locked", "unable to open",
                "readonly database", "out of memory", "interrupted")


class JournalUnusable(UsageError):
    """A file where a journal should be is not a usable gridxfer journal (exit 2)."""


class JournalEnvironmentError(GridxferError):
    """The journal is fine but cannot be used now: full disk, I/O error, locked (exit 1)."""


class JournalDiskFull(JournalEnvironmentError):
    """SQLITE_FULL. What to do next depends on whether the journal was kept (a plan that
    fails is removed), so the line is decided when it is printed, after every clean-up."""

    def __init__(self, path: Path, text: str) -> None:
        self.path, self.text = path, text
        super().__init__(f"{path}: {text}")

    def __str__(self) -> str:
        if not self.path.exists():
            return f"{self.path}: {self.text}; free some space and run again"
        return (f"{self.path}: {self.text}; the journal is consistent: free some space, then "
                f"`gridxfer campaign resume {self.path.stem}`")


def ro_uri(path: Path) -> str:
    """A read-only SQLite URI for any path (a '?' or '#' in a path would end it).

    A reader of another user's journal (the ``nagios`` group, see README "Monitoring")
    cannot create the WAL index (``-shm``) in a directory it may only read; SQLite then
    refuses a WAL database unless its ``-shm`` and ``-wal`` exist (a runner has it open:
    read as usual) or it is opened ``immutable``. With neither file nobody writes it (the
    last connection checkpointed and removed them), so it is read as immutable: a runner
    that starts during that read can at worst make this one read fail."""
    uri = f"file:{quote(str(path))}?mode=ro"
    if not (os.path.exists(f"{path}-shm") or os.path.exists(f"{path}-wal")
            or os.access(Path(path).parent, os.W_OK)):
        uri += "&immutable=1"
    return uri


def verify(path: Path, *, pages: bool = False) -> None:
    """Raise JournalUnusable unless ``path`` holds the core tables of a gridxfer journal.
    ``pages`` (before a writer opens it): also ``intact``, so a damaged page met only later
    (a flipped byte in an index) is refused before any write."""
    if not path.is_file():
        raise JournalUnusable(f"{path}: not a gridxfer journal: not a regular file")
    if path.stat().st_size == 0:
        raise JournalUnusable(f"{path}: not a gridxfer journal: the file is empty")
    try:
        conn = sqlite3.connect(ro_uri(path), uri=True, timeout=30)
    except sqlite3.Error as exc:
        raise error(path, exc) from None
    try:
        tables = {row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = sorted(set(CORE_COLUMNS) - tables)
        if missing:
            raise JournalUnusable(f"{path}: not a gridxfer journal: no table "
                                  f"{', '.join(missing)}")
        for table, need in CORE_COLUMNS.items():
            have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            if not need <= have:
                raise JournalUnusable(f"{path}: not a gridxfer journal: table {table} lacks "
                                      f"{', '.join(sorted(need - have))}")
        if pages:
            intact(conn)
    except (sqlite3.Error, UnicodeDecodeError) as exc:   # a damaged name in the schema
        raise error(path, exc) from None
    finally:
        conn.close()


SHARING = ("journals are 0600 unless their directory is set-group-ID: share it with the "
           "reading group (README, \"Monitoring\")")


def not_readable(path: Path | str) -> str | None:
    """Why this user cannot read journal ``path`` (or its directory), or None."""
    path = Path(path)
    for where, need in ((path.parent, os.R_OK | os.X_OK), (path, os.R_OK)):
        if where.exists() and not os.access(where, need):
            return (f"{where}: permission denied for uid {os.getuid()} "
                    f"(owner uid {where.stat().st_uid}, mode {where.stat().st_mode & 0o7777:04o}); "
                    f"{SHARING}")
    return None


def intact(conn: sqlite3.Connection) -> None:
    """A journal opened to be written is refused if damaged anywhere, not only where the run
    would read first (``resume`` writes its recovery and events before it reads every
    page): SQLite's ``integrity_check`` and every column a run uses. ``quick_check`` was
    not enough: it does not compare indexes with their table, so a flipped byte in a row
    passed it and the run wrote before reading the row and failing (tests/fuzz found it
    in about 1 % of random flips). Measured on a million-file journal (213 MB, loaded
    2-core machine): integrity_check 1.7 s, quick_check 0.6 s, once per run or resume."""
    verdict = conn.execute("PRAGMA integrity_check(1)").fetchone()[0]
    if verdict != "ok":
        raise sqlite3.DatabaseError(f"database disk image is malformed ({verdict})")
    for table, need in WRITE_COLUMNS.items():
        have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if not need <= have:
            raise sqlite3.DatabaseError(f"table {table} lacks {', '.join(sorted(need - have))}")
    # the states a run writes: a damaged CHECK text would refuse them mid-run, after writes
    for table, allowed in CHECKS.items():
        row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?",
                           (table,)).fetchone()
        if row is None or not any(a in str(row[0]) for a in allowed):
            raise sqlite3.DatabaseError(f"table {table}: its state constraint is damaged")


def unplanned(path: Path) -> bool:
    """A journal that a run created and was stopped in while planning (SIGTERM from
    `campaign cancel`, kill -9, a crash): the tables are there, but the plan's one
    transaction never committed, so no meta and no file. Nothing in it is worth keeping;
    anything else (damaged, foreign, half-edited) is not this."""
    try:
        verify(path)
        conn = sqlite3.connect(ro_uri(path), uri=True, timeout=30)
        try:
            return (conn.execute("SELECT count(*) FROM meta").fetchone()[0] == 0
                    and conn.execute("SELECT count(*) FROM files").fetchone()[0] == 0)
        finally:
            conn.close()
    except (GridxferError, sqlite3.Error, UnicodeDecodeError):
        return False


# Numeric columns of ``files`` that the scheduler does arithmetic on: SQLite keeps any text
# put there (column affinity converts only what looks like a number).
_NUMBERS = ("typeof(size) != 'integer' OR size < 0 OR typeof(attempts) != 'integer'"
            " OR typeof(not_before) NOT IN ('integer', 'real')"
            " OR typeof(updated) NOT IN ('integer', 'real')")


def numbers(conn: sqlite3.Connection) -> None:
    """Refuse a journal whose ``files`` rows hold text (or a negative size) where the run
    computes with numbers: one line naming the row, not a TypeError deep in a run."""
    row = conn.execute("SELECT id, size, attempts, not_before, updated FROM files WHERE "
                       f"{_NUMBERS} LIMIT 1").fetchone()
    if row is not None:
        cols = ("size", "attempts", "not_before", "updated")
        col, value = next(((c, v) for c, v in zip(cols, row[1:], strict=True)
                           if not isinstance(v, (int, float))
                           or (c in ("size", "attempts") and (not isinstance(v, int) or v < 0))),
                          ("size", row[1]))
        raise sqlite3.DatabaseError(f"files row {row[0]}: {col} {str(value)[:40]!r} is not "
                                    "a valid number")


def error(path: Path | str, exc: sqlite3.Error | UnicodeDecodeError) -> GridxferError:
    """One line for a SQLite error on journal ``path``, exit 1 or 2 as the module says."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    denied = not_readable(path) if "unable to open" in text.lower() else None
    if denied:
        return JournalEnvironmentError(denied)
    if "full" in text.lower():
        return JournalDiskFull(Path(path), text)
    if any(k in text.lower() for k in _ENVIRONMENT):
        return JournalEnvironmentError(f"{path}: {text}")
    return JournalUnusable(f"{path}: damaged or not a gridxfer journal: {text}")


@contextlib.contextmanager
def reading(path: Path | str) -> Iterator[None]:
    """Turn SQLite errors inside the block into one line naming the journal."""
    try:
        yield
    except sqlite3.Error as exc:
        raise error(path, exc) from None
