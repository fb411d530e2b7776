"""FTS3's vocabulary at work (issue 22): ``priority`` orders what the scheduler hands out
between tiers and files; ``job_metadata`` is kept in the journal and shown by ``report``.
The files move with gridxfer's own file:// route (the real mover)."""
from __future__ import annotations

import json
import os
import sqlite3

import pytest

from gridxfer.cli.main import main


@pytest.fixture
def local(gridxfer_home, tmp_path):
    (tmp_path / "src").mkdir()
    for i in range(6):
        (tmp_path / "src" / f"f{i}.dat").write_bytes(os.urandom(1000 + i))
    return tmp_path


def _spec(tmp_path, body: str):
    path = tmp_path / "p.yaml"
    path.write_text(f"""campaign: p
source:
  url: "file://{tmp_path}/src/"
  files: [f0.dat, {{name: f1.dat, priority: 1}}, {{name: f2.dat, priority: 5}}, f3.dat,
          {{name: f4.dat, priority: 4}}, {{name: f5.dat, activity: Express}}]
destinations:
  - {{tier: LOW, pool: ["file://{tmp_path}/dst/low/"], max_active: 1}}
  - {{tier: HIGH, pool: ["file://{tmp_path}/dst/high/"], max_active: 1, priority: 5}}
retries: {{max: 1, backoff: 0.01s}}
{body}""")
    return path


def _attempts(gridxfer_home):
    conn = sqlite3.connect(gridxfer_home / "campaigns" / "p.sqlite")
    try:
        return conn.execute("SELECT a.tier, f.name FROM attempts a JOIN files f "
                            "ON f.id = a.file_id ORDER BY a.id").fetchall()
    finally:
        conn.close()


def test_priority_orders_tiers_and_files(local, gridxfer_home, capsys):
    assert main(["campaign", "run", "--quiet", str(_spec(local, "priority: 2\n"))]) == 0
    rows = _attempts(gridxfer_home)
    assert rows[0] == ("HIGH", "f2.dat")            # the higher tier is served first
    # per tier: file priority 5, 4, then the campaign's 2 (f0, f3, f5 as listed), then 1
    order = ["f2.dat", "f4.dat", "f0.dat", "f3.dat", "f5.dat", "f1.dat"]
    for tier in ("HIGH", "LOW"):
        assert [n for t, n in rows if t == tier] == order, rows


def test_default_priority_3_sits_between(local, gridxfer_home, capsys):
    assert main(["campaign", "run", "--quiet", str(_spec(local, ""))]) == 0
    rows = [n for t, n in _attempts(gridxfer_home) if t == "LOW"]
    assert rows == ["f2.dat", "f4.dat", "f0.dat", "f3.dat", "f5.dat", "f1.dat"]


def test_job_metadata_in_journal_and_report(local, gridxfer_home, capsys):
    spec = _spec(local, "job_metadata: {request: 4711, owner: ops}\n")
    assert main(["campaign", "run", "--quiet", str(spec)]) == 0
    capsys.readouterr()
    assert main(["campaign", "report", "--json", "p"]) == 0
    assert json.loads(capsys.readouterr().out)["job_metadata"] == {"request": 4711,
                                                                   "owner": "ops"}
    assert main(["campaign", "report", "p"]) == 0
    assert 'job_metadata: {"owner": "ops", "request": 4711}' in capsys.readouterr().out


def test_activity_shares_divide_the_first_round(local, gridxfer_home, capsys):
    """4 slots, Express 3 : default 1: the first round hands out 3 Express and 1 default,
    though the default files come first in the list."""
    for i in range(6, 10):
        (local / "src" / f"f{i}.dat").write_bytes(b"x" * 100)
    files = ", ".join([f"f{i}.dat" for i in range(5)]
                      + [f"{{name: f{i}.dat, activity: Express}}" for i in range(5, 10)])
    path = local / "a.yaml"
    path.write_text(f"""campaign: p
source: {{url: "file://{local}/src/", files: [{files}]}}
destinations:
  - {{tier: T, pool: ["file://{local}/dst/t/"], max_active: 4, min_active: 4}}
activity_shares: {{Express: 3, default: 1}}
""")
    assert main(["campaign", "run", "--quiet", str(path)]) == 0
    first = [n for _, n in _attempts(gridxfer_home)[:4]]
    assert sorted(first) == ["f0.dat", "f5.dat", "f6.dat", "f7.dat"], first
