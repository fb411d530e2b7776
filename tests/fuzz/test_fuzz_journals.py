"""Fuzz: damaged, foreign and half-written campaign journals (seeded, in-process).

``status``, ``report`` and ``resume`` of a journal that cannot be used exit 2 with one line
naming the journal; ``resume`` never writes into a file that is not a gridxfer journal;
``list`` shows each unreadable journal with its reason and goes on with the others; the
Nagios throughput check reads the same files and answers with one status line.
"""
from __future__ import annotations

import hashlib
import json
import random
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzzgen import byte_flip  # noqa: E402
from fuzzrun import Tally, judge_check, judge_gx, run_check, run_gx  # noqa: E402


@pytest.fixture
def good_journal(tmp_path, monkeypatch) -> Path:
    """A planned journal of 5 local files (nothing transferred)."""
    home = tmp_path / "gxhome"
    monkeypatch.setenv("GRIDXFER_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "src"
    src.mkdir()
    for i in range(5):
        (src / f"f{i}.dat").write_bytes(b"y" * (100 + i))
    spec = tmp_path / "good.yaml"
    spec.write_text(f'campaign: good\nsource: {{url: "file://{src}/", files: {{glob: "*.dat"}}}}\n'
                    f'destinations: [{{tier: T1, pool: ["file://{tmp_path}/dst/"]}}]\n'
                    'retries: {max: 0, backoff: 0s}\n')
    from gridxfer.campaign.runner import plan
    from gridxfer.campaign.spec.schema import load_spec
    path, _ = plan(load_spec(spec))
    return path


def _edit(path: Path, *sql: str) -> None:
    conn = sqlite3.connect(path)
    for stmt in sql:
        conn.execute(stmt)
    conn.commit()
    conn.close()


def _variants(good: Path, rnd: random.Random) -> dict[str, bytes | None]:
    """name -> file content (None: built with SQL below)."""
    data = good.read_bytes()
    out: dict[str, bytes | None] = {
        "empty": b"", "nul": b"\0" * 8192, "text": b"hello, journal\n",
        "garbage": bytes(rnd.getrandbits(8) for _ in range(4096)),
        "header-garbage": b"SQLite format 3\0" + bytes(rnd.getrandbits(8) for _ in range(8000)),
        "utf8": "campaign ☃".encode() + b"\xff\xfe" * 100,
    }
    for k in range(12):
        out[f"trunc{k}"] = data[:rnd.randrange(1, len(data))]
    for k in range(4):
        out[f"trunc-page{k}"] = data[:4096 * (k + 1)]
    for k in range(24):
        out[f"flip{k}"] = byte_flip(rnd, data)
    for name in ("foreign", "foreign-meta", "no-spec", "spec-notjson", "spec-list", "spec-types",
                 "spec-deep", "pid-unicode", "pid-huge", "no-files-table", "state-weird",
                 "created-nan", "spec-missing-keys", "size-text", "size-negative",
                 "size-real", "attempts-text", "not-before-text", "unplanned"):
        out[name] = None
    return out


SQL = {
    "no-spec": ["DELETE FROM meta WHERE key = 'spec'"],
    "spec-notjson": ["UPDATE meta SET value = '{{' WHERE key = 'spec'"],
    "spec-list": ["UPDATE meta SET value = '[1, 2]' WHERE key = 'spec'"],
    "spec-types": ["UPDATE meta SET value = '{\"name\": 5, \"source\": 7}' WHERE key = 'spec'"],
    "spec-missing-keys": ["UPDATE meta SET value = '{\"name\": \"x\"}' WHERE key = 'spec'"],
    "spec-deep": [
        "UPDATE meta SET value = '" + "[" * 100000 + "]" * 100000 + "' WHERE key = 'spec'"
    ],
    "pid-unicode": [
        "UPDATE meta SET value = 'running' WHERE key = 'state'",
        "INSERT OR REPLACE INTO meta VALUES ('pid', '\u00b2')",
    ],
    "pid-huge": [
        "UPDATE meta SET value = 'running' WHERE key = 'state'",
        "INSERT OR REPLACE INTO meta VALUES ('pid', '" + "9" * 400 + "')",
    ],
    "no-files-table": ["DROP TABLE files"],
    "state-weird": ["UPDATE meta SET value = '\u2603\n\x1b[2J' WHERE key = 'state'"],
    "created-nan": ["UPDATE meta SET value = 'nan' WHERE key = 'created'"],
    "size-text": ["UPDATE files SET size = 'abc' WHERE id = 1"],
    "size-negative": ["UPDATE files SET size = -5 WHERE id = 2"],
    "size-real": ["UPDATE files SET size = 1.5 WHERE id = 3"],
    "attempts-text": ["UPDATE files SET attempts = 'x' WHERE id = 1"],
    "not-before-text": ["UPDATE files SET not_before = 'soon' WHERE id = 1"],
    # a run stopped while planning: the tables, no plan (runner.plan's one transaction)
    "unplanned": ["DELETE FROM meta", "DELETE FROM events", "DELETE FROM attempts",
                  "DELETE FROM files"],
}


def _write(home: Path, good: Path, rnd: random.Random) -> dict[str, Path]:
    paths = {}
    for name, blob in _variants(good, rnd).items():
        path = home / "campaigns" / f"j-{name}.sqlite"
        if blob is None and name.startswith("foreign"):
            conn = sqlite3.connect(path)
            conn.execute("CREATE TABLE users (id INTEGER, name TEXT)" if name == "foreign"
                         else "CREATE TABLE meta (k INTEGER, v BLOB, other TEXT)")
            conn.execute("INSERT INTO users VALUES (1, 'x')" if name == "foreign"
                         else "INSERT INTO meta VALUES (1, x'00', 'y')")
            conn.commit()
            conn.close()
        elif blob is None:
            shutil.copyfile(good, path)
            _edit(path, *SQL[name])
        else:
            path.write_bytes(blob)
        paths[name] = path
    return paths


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "-"


def test_damaged_journals(good_journal, tmp_path):
    home = good_journal.parent.parent
    paths = _write(home, good_journal, random.Random(17))
    tally = Tally()
    for name, path in sorted(paths.items()):
        cname = path.stem
        for argv, allowed in ((["campaign", "status", cname], {0, 2}),
                              (["campaign", "status", "--links", "--json", cname], {0, 2}),
                              (["campaign", "report", cname], {0, 2}),
                              (["campaign", "report", "--json", cname], {0, 2})):
            o = run_gx(argv)
            tally.add(f"{name}: {' '.join(argv[:3])}", o, judge_gx(o, allowed, (str(path),)))
    print(tally.report("damaged journals (status, report)"))
    assert tally.cases >= 200 and not tally.problems, tally.report("damaged journals")


def test_resume_refuses_damaged_and_foreign_journals_and_writes_nothing(good_journal, tmp_path):
    home = good_journal.parent.parent
    paths = _write(home, good_journal, random.Random(23))
    tally = Tally()
    for name, path in sorted(paths.items()):
        before = _digest(path)
        o = run_gx(["campaign", "resume", "--quiet", path.stem])
        # a journal that still reads may run (0, 3); one that cannot be used is refused (2)
        problem = judge_gx(o, {0, 2, 3}, (str(path),))
        if problem is None and o.code == 2 and _digest(path) != before:
            problem = "refused, yet the file was changed"
        if (problem is None and name in ("empty", "nul", "text", "garbage", "foreign",
                                        "foreign-meta", "no-spec", "spec-notjson", "spec-deep",
                                        "no-files-table", "size-text", "size-negative",
                                        "size-real", "attempts-text", "not-before-text",
                                        "unplanned")
                and o.code != 2):
            problem = "must be refused (exit 2)"
        if name.startswith("foreign") and _digest(path) != before:
            problem = "gridxfer wrote into a foreign SQLite file"
        tally.add(f"{name}: resume", o, problem)
    print(tally.report("damaged journals (resume)"))
    assert tally.cases >= 55 and not tally.problems, tally.report("resume")


def test_list_shows_unreadable_journals_and_goes_on(good_journal, tmp_path):
    home = good_journal.parent.parent
    paths = _write(home, good_journal, random.Random(29))
    (home / "campaigns" / "j-dir.sqlite").mkdir()
    tally = Tally()
    o = run_gx(["campaign", "list"])
    tally.add("list", o, judge_gx(o, {0}))
    lines = o.out.splitlines()
    assert any(line.startswith("good ") and "0/5 done" in line for line in lines), o.out
    for stem in ("j-empty", "j-garbage", "j-foreign", "j-foreign-meta", "j-dir"):
        assert any(line.startswith(f"{stem} ") and "unreadable" in line for line in lines), \
            (stem, o.out)
    assert any("unreadable" in line and "j-garbage" in line for line in lines), o.out
    assert len(lines) == len(paths) + 2, o.out           # + good + the directory
    o = run_gx(["campaign", "list", "--json"])
    tally.add("list --json", o, judge_gx(o, {0}))
    items = json.loads(o.out)
    assert {i["campaign"] for i in items} >= {"good", "j-garbage", "j-empty"}
    bad = [i for i in items if i["state"] == "unreadable"]
    assert bad and all(i["error"] for i in bad)
    assert not tally.problems, tally.report("list")


def test_a_journal_stopped_while_planning_says_so_in_status_and_list(good_journal):
    """Not "?" and zero counts: the plan never committed, and `run` starts it again."""
    home = good_journal.parent.parent
    _write(home, good_journal, random.Random(37))
    o = run_gx(["campaign", "status", "j-unplanned"])
    assert o.code == 0 and o.out.strip().startswith(
        "campaign j-unplanned: unplanned: stopped while planning"), o.out
    assert "campaign run FILE" in o.out
    line = next(x for x in run_gx(["campaign", "list"]).out.splitlines()
                if x.startswith("j-unplanned "))
    assert "unplanned" in line and "stopped while planning" in line, line
    assert json.loads(run_gx(["campaign", "status", "--json", "j-unplanned"]).out)[
        "state"] == "unplanned"


def test_checks_on_damaged_journals(good_journal, tmp_path):
    from gridxfer.monitoring.checks import buffer, throughput
    home = good_journal.parent.parent
    paths = _write(home, good_journal, random.Random(31))
    tally = Tally()
    for name, path in sorted(paths.items()):
        for argv in (["-J", str(path)], ["-C", path.stem, "-W", "1h"]):
            o = run_check(throughput, argv)
            tally.add(f"{name}: throughput {argv[0]}", o, judge_check(o, {0, 1, 2, 3}))
        o = run_check(buffer, ["--capacity", "10GB", "--used", "1GB", "--outflow", "1MB/s",
                               "--inflow-journal", str(path)])
        tally.add(f"{name}: buffer --inflow-journal", o, judge_check(o, {0, 1, 2, 3}))
    o = run_check(throughput, [])          # every journal of $GRIDXFER_HOME at once
    tally.add("throughput (all journals)", o, judge_check(o, {0, 1, 2, 3}))
    print(tally.report("damaged journals (check_gridxfer_throughput, _buffer)"))
    assert tally.cases >= 170 and not tally.problems, tally.report("checks")


STATE_TEXTS = ["", "{{", "[]", "[1, 2]", "null", '"x"', "5", '{"mode": 5, "endpoints": []}',
               '{"host": "local", "status": "applied", "profile": "p", "originals": "abc"}',
               '{"host": "local", "status": "applied", "profile": "p", "originals": [1], '
               '"files": ["x"]}', '{"host": 1, "originals": {"a": 1}, "files": {"b": 2}}',
               "[" * 100000 + "]" * 100000, "\xff\xfe", "\0" * 100]


def test_damaged_state_files(tmp_path, monkeypatch):
    """State gridxfer wrote itself, damaged: the testbed inventory and the tuning state.
    Exit 1 (the environment: gridxfer's own file is broken) with one line naming it."""
    home = tmp_path / "gxhome"
    (home / "testbed").mkdir(parents=True)
    (home / "tuning").mkdir()
    monkeypatch.setenv("GRIDXFER_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    tally = Tally()
    for i, text in enumerate(STATE_TEXTS):
        inv = home / "testbed" / "inventory.json"
        inv.write_bytes(text.encode("utf-8", "surrogateescape") if text != "\xff\xfe"
                        else b"\xff\xfe")
        for argv in (["testbed", "status"], ["testbed", "env"], ["testbed", "down", "--dry-run"],
                     ["testbed", "exec", "t0-xrd", "--", "true"]):
            o = run_gx(argv)
            tally.add(f"inventory #{i}: {' '.join(argv)}", o, judge_gx(o, {1}))
        st = home / "tuning" / "local.json"
        st.write_bytes(inv.read_bytes())
        o = run_gx(["tune", "rollback", "--dry-run"])
        tally.add(f"tuning state #{i}: rollback --dry-run", o, judge_gx(o, {0, 1}))
        st.unlink()
    print(tally.report("damaged state files"))
    assert tally.cases >= 70 and not tally.problems, tally.report("state files")


@pytest.mark.parametrize("target,code,fragment", [
    ("missing/dir/t.png", 2, "no such directory"),
    ("t.weird-suffix", 0, None),                 # always a PNG, whatever the suffix
])
def test_report_png_target(good_journal, tmp_path, target, code, fragment):
    out = tmp_path / target
    o = run_gx(["campaign", "report", "good", "--png", str(out)])
    assert judge_gx(o, {code}, (str(out.parent),)) is None, o
    if fragment:
        assert fragment in o.err and not (tmp_path / "missing").exists()
    else:
        assert out.read_bytes().startswith(b"\x89PNG")
