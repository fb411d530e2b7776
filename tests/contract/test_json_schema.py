"""The `--json` contract (schema 1, cli/jsonshape.py): `campaign run`, `resume`, `status` and
`report` print one shape. Changing a key here means raising "schema" and the README."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gridxfer.cli.main import main
from tests.cli import test_campaign_cli as base

local = base.local      # the fixture: a local test mover and six source files

TOP = {"schema", "kind", "campaign", "state", "journal", "times", "files", "bytes", "tiers",
       "endpoints", "failed_files", "filters", "job_metadata", "run", "status", "report"}
TIMES = {"created", "updated", "started", "ended"}
FILES = {"total", "done", "failed", "pending", "active", "cancelled"}
BYTES = {"total", "done", "failed", "pending", "active"}
FAILED = {"name", "tier", "endpoint", "url", "error_class", "error_msg", "attempts"}
FILTERS = {"tier", "endpoint", "failed", "since"}
KIND = {"run": {"dry_run", "seconds", "mean_rate", "recovered", "cleaned", "paused", "edited",
                "reloaded", "plan"},
        "status": {"links", "excluded", "paused", "tape"},
        "report": {"seconds", "rate", "links", "endpoints", "histogram", "share", "tape", "png"}}
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
TIME_KEYS = TIMES | {"since", "until", "t0"}


def _walk_times(obj, where="$"):
    """Every point in time anywhere in the document is ISO 8601 (or null), never epoch."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in TIME_KEYS and not isinstance(v, dict):
                assert v is None or (isinstance(v, str) and ISO.fullmatch(v)), f"{where}.{k}={v!r}"
            _walk_times(v, f"{where}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _walk_times(v, f"{where}[{i}]")


def _check(doc: dict, kind: str) -> None:
    assert set(doc) == TOP and doc["schema"] == 1 and doc["kind"] == kind
    assert set(doc["times"]) == TIMES and set(doc["files"]) == FILES
    assert set(doc["bytes"]) == BYTES and set(doc["filters"]) == FILTERS
    assert all(set(t) == BYTES for t in doc["tiers"].values())
    assert all(set(f) == FAILED for f in doc["failed_files"])
    assert set(doc[kind]) == KIND[kind]
    assert all(doc[k] is None for k in KIND if k != kind)
    _walk_times(doc)


@pytest.fixture
def docs(local, capsys) -> dict[str, dict]:
    spec = base.campaign(local, files='["f0.dat", {name: gone.dat, size: 5}, "f1.dat"]')
    out = {}
    assert main(["campaign", "run", "--quiet", "--json", str(spec)]) == 3
    out["run"] = json.loads(capsys.readouterr().out)
    assert main(["campaign", "status", "c1", "--json", "--links"]) == 0
    out["status"] = json.loads(capsys.readouterr().out)
    assert main(["campaign", "report", "c1", "--json"]) == 0
    out["report"] = json.loads(capsys.readouterr().out)
    assert main(["campaign", "resume", "c1", "--quiet", "--json"]) == 3
    out["resume"] = json.loads(capsys.readouterr().out)
    return out


def test_run_status_report_share_one_shape(docs):
    for kind in ("run", "status", "report"):
        _check(docs[kind], kind)
    _check(docs["resume"], "run")
    for doc in docs.values():       # the same figures under the same keys
        assert (doc["files"]["total"], doc["files"]["done"], doc["files"]["failed"]) == (3, 2, 1)
        assert [f["name"] for f in doc["failed_files"]] == ["gone.dat"]
        assert doc["failed_files"][0]["error_class"] == "source_missing"
    assert docs["run"]["times"]["started"] is not None


def test_dry_run_has_the_same_shape(local, capsys):
    assert main(["campaign", "run", "--dry-run", "--json", str(base.campaign(local))]) == 0
    doc = json.loads(capsys.readouterr().out)
    _check(doc, "run")
    assert doc["run"]["dry_run"] is True and doc["journal"] is None
    assert doc["files"]["total"] == doc["files"]["pending"] == 6


def test_readme_documents_every_key():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("### JSON output", 1)[1].split("\n## ", 1)[0]
    assert '"schema": 1' in section
    for key in TOP | TIMES | FILES | FILTERS | FAILED | set().union(*KIND.values()):
        assert f"`{key}`" in section or f'"{key}"' in section, key
