"""What every view shows (issue 22): one name per endpoint, tables that fit the terminal,
progress lines when output is not a terminal."""
from __future__ import annotations

import json

import pytest

from gridxfer.campaign.journal import names, store
from gridxfer.campaign.report.summary import timeline
from gridxfer.cli.main import main
from tests.cli import test_campaign_cli as base

local = base.local      # the fixture: a local test mover and six source files


def named_campaign(tmp_path, name="c1", extra=""):
    text = f"""campaign: {name}
source: {{url: "file://{tmp_path}/src/", files: {{glob: "*.dat"}}}}
destinations:
  - tier: T1
    pool:
      - {{url: "file://{tmp_path}/dst/a/", name: cnaf-se01}}
      - "file://{tmp_path}/dst/b/"
    max_active: 2
retries: {{max: 1, backoff: 0.01s}}
{extra}"""
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def test_one_name_per_endpoint_in_journal_report_and_timeline(local, capsys):
    assert main(["campaign", "run", "--quiet", str(named_campaign(local))]) == 0
    capsys.readouterr()
    conn = store.connect(store.journal_path("c1"), readonly=True)
    try:
        got = names.read(conn)
    finally:
        conn.close()
    a, b = f"file://{local}/dst/a/", f"file://{local}/dst/b/"
    assert (got[a], got[b]) == ("cnaf-se01", "b")
    assert main(["campaign", "report", "c1"]) == 0
    out = capsys.readouterr().out
    assert "cnaf-se01" in out and str(local) not in out, out
    assert set(timeline("c1")["sessions"]) <= {"cnaf-se01", "b"}


@pytest.mark.parametrize("pool, needle", [
    ('[{url: "file:///x/a/", name: "bad name"}]', "bad endpoint name"),
    ('[{url: "file:///x/a/", name: n1}, {url: "file:///x/b/", name: n1}]', "already names"),
    ('[{url: "file:///x/a/", nick: n1}]', "unknown key"),
])
def test_bad_endpoint_names_are_one_line_exit_2(tmp_path, gridxfer_home, capsys, pool, needle):
    path = tmp_path / "bad.yaml"
    path.write_text(f"""campaign: c2
source: {{url: "file:///src/", files: ["f"]}}
destinations:
  - tier: T1
    pool: {pool}
""")
    assert main(["campaign", "run", "--dry-run", str(path)]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.startswith(f"gridxfer: error: {path}:5: "), err


def test_status_links_names_excluded_endpoints(local, capsys):
    assert main(["campaign", "run", "--quiet", str(named_campaign(local))]) == 0
    conn = store.connect(store.journal_path("c1"))
    store.add_event(conn, "excluded", tier="T1", url=f"file://{local}/dst/a/",
                    reason="circuit open", until=None)
    conn.commit()
    conn.close()
    capsys.readouterr()
    assert main(["campaign", "status", "c1", "--links"]) == 0
    assert "excluded T1 cnaf-se01: circuit open" in capsys.readouterr().out
    assert main(["campaign", "status", "c1", "--links", "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert [e["endpoint"] for e in st["status"]["excluded"]] == ["cnaf-se01"]
