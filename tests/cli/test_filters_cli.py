"""`campaign status` and `report` filters (issue 22f): --tier, --endpoint, --failed, --since
(campaign/report/filters.py: TEMP views over a read-only journal)."""
from __future__ import annotations

import json

import pytest

from gridxfer.cli.main import main
from tests.cli import test_campaign_cli as base

local = base.local      # the fixture: a local test mover and six source files


@pytest.fixture
def two_tiers(local, capsys):
    text = f"""campaign: c1
source: {{url: "file://{local}/src/", files: ["f0.dat", "f1.dat", {{name: gone.dat, size: 5}}]}}
destinations:
  - {{tier: T1, pool: [{{url: "file://{local}/dst/a/", name: site-a}}]}}
  - {{tier: T2, pool: [{{url: "file://{local}/dst/b/", name: site-b}}]}}
retries: {{max: 0}}
"""
    (local / "c1.yaml").write_text(text)
    assert main(["campaign", "run", "--quiet", str(local / "c1.yaml")]) == 3
    capsys.readouterr()
    return local


def _status(capsys, *args):
    assert main(["campaign", "status", "c1", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_status_filters(two_tiers, capsys):
    every = _status(capsys)
    assert (every["files"]["total"], every["files"]["done"], every["files"]["failed"]) == (6, 4, 2)
    t2 = _status(capsys, "--tier", "T2")
    assert set(t2["tiers"]) == {"T2"} and t2["files"]["total"] == 3
    assert t2["filters"]["tier"] == "T2"
    a = _status(capsys, "--endpoint", "site-a")
    assert set(a["tiers"]) == {"T1"} and a["files"]["total"] == 3
    assert _status(capsys, "--endpoint", "site-*")["files"]["total"] == 6
    assert _status(capsys, "--endpoint", "nowhere")["files"]["total"] == 0
    failed = _status(capsys, "--failed", "--tier", "T1")
    assert failed["files"] == {"total": 1, "done": 0, "failed": 1, "pending": 0, "active": 0,
                               "cancelled": 0}
    assert [(f["tier"], f["name"]) for f in failed["failed_files"]] == [("T1", "gone.dat")]
    assert _status(capsys, "--since", "1h")["files"]["total"] == 6
    assert _status(capsys, "--since", "2999-01-01T00:00Z")["files"]["total"] == 0

    assert main(["campaign", "status", "c1", "--failed"]) == 0
    text = capsys.readouterr().out
    assert "(only failed files)" in text and "FAILED T2 gone.dat at site-b: source_missing" in text


def test_report_filters(two_tiers, capsys):
    assert main(["campaign", "report", "c1", "--json", "--tier", "T2"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert [g["tier"] for g in rep["report"]["links"]] == ["T2"]
    assert [g["endpoint"] for g in rep["report"]["endpoints"]] == ["site-b"]
    assert rep["files"]["total"] == 3
    assert main(["campaign", "report", "c1", "--endpoint", "site-a", "--png",
                 str(two_tiers / "a.png")]) == 0
    out = capsys.readouterr().out
    assert "site-a" in out and "site-b" not in out
    assert (two_tiers / "a.png").stat().st_size > 1000


@pytest.mark.parametrize("since", ["yesterday", "2h30", "-5m", "99999999d"])
def test_bad_since_is_one_line_exit_2(two_tiers, capsys, since):
    assert main(["campaign", "status", "c1", "--since", since]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--since" in err, err
