"""A journal opened to be written (resume) is refused before anything is written when it is
damaged where SQLite's quick_check does not look: an index that disagrees with its table, a
column lost from the schema text, a state constraint that would refuse the run's own writes.
tests/fuzz found each (about 1 % of random byte flips): resume wrote, then failed."""
from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from gridxfer.campaign import runner
from gridxfer.campaign.journal.check import JournalUnusable
from gridxfer.campaign.spec.schema import load_spec


@pytest.fixture
def planned(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("GRIDXFER_HOME", str(tmp_path / "home"))
    src = tmp_path / "src"
    src.mkdir()
    for i in range(5):
        (src / f"f{i}.dat").write_bytes(b"y" * (100 + i))
    spec = tmp_path / "c.yaml"
    spec.write_text(f'campaign: c\nsource: {{url: "file://{src}/", files: {{glob: "*.dat"}}}}\n'
                    f'destinations: [{{tier: T1, pool: ["file://{tmp_path}/dst/"]}}]\n')
    path, _ = runner.plan(load_spec(spec))
    return path


def _schema_edit(path: Path, table: str, old: str, new: str) -> None:
    conn = sqlite3.connect(path)
    (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    assert old in sql
    version = conn.execute("PRAGMA schema_version").fetchone()[0]
    conn.execute("PRAGMA writable_schema=ON")
    conn.execute("UPDATE sqlite_master SET sql = ? WHERE name = ?", (sql.replace(old, new), table))
    conn.execute(f"PRAGMA schema_version={version + 1}")
    conn.commit()
    conn.close()


def _row_flip(path: Path) -> None:
    """One copy of a source URL changed (the table's or the index's, not both)."""
    data = bytearray(path.read_bytes())
    at = data.find(b"src/f4.dat")
    assert at > 0
    data[at + 4] = ord("g")
    path.write_bytes(bytes(data))


DAMAGE = {
    "index-disagrees": _row_flip,
    "column-lost": lambda p: _schema_edit(p, "files", "endpoint TEXT,", "endpoinx TEXT,"),
    "attempt-states": lambda p: _schema_edit(p, "attempts", "'failed'", "'fa)led'"),
    "file-states": lambda p: _schema_edit(p, "files", "'active'", "'activE'"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_resume_refuses_before_writing(planned, damage):
    for suffix in ("-wal", "-shm"):
        Path(f"{planned}{suffix}").unlink(missing_ok=True)
    DAMAGE[damage](planned)
    before = hashlib.sha256(planned.read_bytes()).hexdigest()
    with pytest.raises(JournalUnusable):
        runner.resume_campaign("c")
    assert hashlib.sha256(planned.read_bytes()).hexdigest() == before
