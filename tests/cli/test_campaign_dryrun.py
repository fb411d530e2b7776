"""`campaign run --dry-run` shows the plan (issue 22): the first pairs in dispatch order,
counts per tier (refused names counted), every endpoint probed once (the real file://
route: stat, a probe file written and deleted, free space), and it fails where `run`
would. Remote endpoints: tests/integration/test_campaign_dryrun.py."""
from __future__ import annotations

import json
import os

import pytest

from gridxfer.cli.main import main


@pytest.fixture
def tree(gridxfer_home, tmp_path):
    (tmp_path / "src").mkdir()
    for i in range(5):
        (tmp_path / "src" / f"f{i}.dat").write_bytes(os.urandom(1000))
    return tmp_path


def _spec(tmp_path, pools: str, extra: str = "", files: str = '{glob: "*"}'):
    path = tmp_path / "d.yaml"
    path.write_text(f"""campaign: d
source: {{url: "file://{tmp_path}/src/", files: {files}}}
destinations:
{pools}{extra}""")
    return path


def test_plan_pairs_counts_and_probes(tree, capsys):
    spec = _spec(tree, f"""  - {{tier: A, pool: ["file://{tree}/dst/a/"]}}
  - {{tier: B, pool: ["file://{tree}/dst/b/"], priority: 5}}
""")
    assert main(["campaign", "run", "--dry-run", "--show", "3", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "campaign d: would transfer 10 files, 10.00 KB (2 tiers)" in out, out
    assert "  tier B (priority 5, 1 endpoint): 5 files, 5.00 KB\n" in out
    assert "  tier A (priority 3, 1 endpoint): 5 files, 5.00 KB\n" in out
    assert "first 3 transfers" in out
    assert (f"  B: file://{tree}/src/f0.dat -> file://{tree}/dst/b/f0.dat\n"
            f"  A: file://{tree}/src/f0.dat -> file://{tree}/dst/a/f0.dat\n"
            f"  B: file://{tree}/src/f1.dat -> file://{tree}/dst/b/f1.dat\n") in out
    assert f"  B: file://{tree}/dst/b/: ok (reachable, writable, " in out
    assert f"  source: file://{tree}/src/: ok (reachable)" in out
    assert sorted(os.listdir(tree / "dst" / "b")) == []        # the probe file is gone
    capsys.readouterr()
    assert main(["campaign", "run", "--dry-run", "--json", "--show", "1", str(spec)]) == 0
    res = json.loads(capsys.readouterr().out)
    plan = res["run"]["plan"]
    assert plan["pairs"] == [["B", f"file://{tree}/src/f0.dat", f"file://{tree}/dst/b/f0.dat"]]
    probes = {p["url"]: p for p in plan["probes"]}
    assert probes[f"file://{tree}/dst/a/"]["writable"] is True
    assert probes[f"file://{tree}/dst/a/"]["free"] > 0
    assert [t["tier"] for t in plan["tiers"]] == ["B", "A"]


def test_refused_names_counted_and_fail_like_run(tree, capsys):
    (tree / "src" / "bad\x07name.dat").write_bytes(b"x")
    spec = _spec(tree, f'  - {{tier: A, pool: ["file://{tree}/dst/a/"]}}\n')
    assert main(["campaign", "run", "--dry-run", str(spec)]) == 3
    out, err = capsys.readouterr()
    assert "6 files, 5.00 KB, 1 with names refused (they would fail)" in out, out
    assert "a run of d would fail files: 1 files have names gridxfer refuses" in err
    assert main(["campaign", "run", "--quiet", str(spec)]) == 3      # as the run does


def test_names_a_destination_protocol_refuses_are_counted_per_tier(tree, capsys):
    """ftp:// cannot carry a non-ASCII name (movers/names.py): refused on that tier only,
    shown with the reason, and planned failed by the run (journal: test_hostile_names)."""
    (tree / "src" / "\u00e41.dat").write_bytes(b"x")
    spec = _spec(tree, f"""  - {{tier: A, pool: ["file://{tree}/dst/a/"]}}
  - {{tier: F, pool: ["file://{tree}/dst/f/", "ftp://127.0.0.1:9/x/"]}}
""")
    assert main(["campaign", "run", "--dry-run", "--no-probe", str(spec)]) == 3
    out, err = capsys.readouterr()
    assert "  tier A (priority 3, 1 endpoint): 6 files, 5.00 KB\n" in out, out
    assert "6 files, 5.00 KB, 1 with names refused (they would fail)" in out
    assert ("  REFUSED F \u00e41.dat: bad file name '\u00e41.dat': ftp:// cannot carry a "
            "non-ASCII character") in out
    assert "REFUSED A" not in out
    assert "1 files have names gridxfer refuses (bad_name)" in err


def test_a_name_longer_than_name_max_is_refused_before_anything_is_sent(tree, capsys,
                                                                        gridxfer_home):
    """No file system takes a component over 255 bytes: refused at plan time (bad_name, no
    attempt), where a copy once failed and was retried as class other."""
    import sqlite3
    long = "\u00e4" * 127 + "xy"                  # 127 characters, 256 bytes
    spec = _spec(tree, f'  - {{tier: A, pool: ["file://{tree}/dst/a/"]}}\n',
                 files=f'["f0.dat", "{long}"]')
    assert main(["campaign", "run", "--dry-run", "--no-probe", str(spec)]) == 3
    out, err = capsys.readouterr()
    assert f"REFUSED A {long}: bad file name '{long}': a path component of 256 bytes, " \
           "longer than NAME_MAX (255 bytes" in out, out
    assert main(["campaign", "run", "--quiet", str(spec)]) == 3
    conn = sqlite3.connect(gridxfer_home / "campaigns" / "d.sqlite")
    rows = conn.execute("SELECT name, state, error_class, attempts FROM files").fetchall()
    assert sorted(rows) == [("f0.dat", "done", None, 1), (long, "failed", "bad_name", 0)]
    assert os.listdir(tree / "dst" / "a") == ["f0.dat"]


def test_a_tier_with_no_usable_endpoint_fails(tree, capsys):
    (tree / "plain").write_text("not a directory")
    spec = _spec(tree, f"""  - {{tier: A, pool: ["file://{tree}/dst/a/", "file://{tree}/plain/x/"]}}
  - {{tier: Z, pool: ["file://{tree}/plain/y/"]}}
""")
    assert main(["campaign", "run", "--dry-run", str(spec)]) == 3
    out, err = capsys.readouterr()
    assert f"  A: file://{tree}/plain/x/: FLAGGED: " in out
    assert f"  A: file://{tree}/dst/a/: ok" in out
    assert "no endpoint of tier Z can be used" in err and "tier A" not in err
    assert main(["campaign", "run", "--dry-run", "--no-probe", str(spec)]) == 0
    assert "endpoints:" not in capsys.readouterr().out


def test_dry_run_refuses_where_run_refuses(tree, capsys):
    spec = _spec(tree, f'  - {{tier: A, pool: ["file://{tree}/dst/a/"]}}\n')
    assert main(["campaign", "run", "--quiet", str(spec)]) == 0
    capsys.readouterr()
    assert main(["campaign", "run", "--dry-run", str(spec)]) == 2
    assert "already has a journal" in capsys.readouterr().err
    # --replace: the journal goes, the copies stay: with overwrite off the run fails them
    assert main(["campaign", "run", "--dry-run", "--replace", str(spec)]) == 3
    assert "exist and overwrite is off" in capsys.readouterr().err
    empty = _spec(tree, f'  - {{tier: A, pool: ["file://{tree}/dst/a/"]}}\n',
                  files='{glob: "*.none"}')
    assert main(["campaign", "run", "--dry-run", "--replace", str(empty)]) == 2
    assert "the source matched no files" in capsys.readouterr().err


def test_existing_destinations_fail_like_run(tree, capsys):
    (tree / "dst" / "a").mkdir(parents=True)
    (tree / "dst" / "a" / "f1.dat").write_bytes(b"old")
    spec = _spec(tree, f'  - {{tier: A, pool: ["file://{tree}/dst/a/"]}}\n')
    assert main(["campaign", "run", "--dry-run", str(spec)]) == 3
    out, err = capsys.readouterr()
    assert f"  EXISTS file://{tree}/dst/a/f1.dat: overwrite is off, a run fails it" in out
    assert "1 of the destinations shown exist and overwrite is off" in err
    spec.write_text(spec.read_text() + "overwrite: true\n")
    assert main(["campaign", "run", "--dry-run", str(spec)]) == 0
    assert "EXISTS" not in capsys.readouterr().out


def test_a_tape_tier_the_protocol_cannot_ask_is_refused(tree, capsys):
    spec = _spec(tree, f'  - {{tier: A, pool: ["file://{tree}/dst/a/"], '
                       f'archive: {{timeout: 1h}}}}\n')
    assert main(["campaign", "run", "--dry-run", "--no-probe", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "cannot report whether a file is on tape" in err, err
    assert main(["campaign", "run", "--quiet", str(spec)]) == 2       # as the run does
    assert "cannot report whether a file is on tape" in capsys.readouterr().err


def test_files_per_activity_with_shares(tree, capsys):
    files = "[f0.dat, {name: f1.dat, activity: Express}, {name: f2.dat, activity: Express}]"
    spec = _spec(tree, f'  - {{tier: A, pool: ["file://{tree}/dst/a/"]}}\n',
                 "activity_shares: {Express: 3, default: 1}\n", files=files)
    assert main(["campaign", "run", "--dry-run", "--no-probe", str(spec)]) == 0
    assert "  tier A (priority 3, 1 endpoint): 3 files (Express 2, default 1), 3.00 KB\n" \
        in capsys.readouterr().out


@pytest.mark.parametrize("files", ['{glob: "*"}', "[f0.dat, out.dat, sub/f.dat]", "from"],
                         ids=["glob", "list", "list-file"])
def test_links_out_of_the_source_are_refused_names_as_in_the_run(tree, capsys, files):
    """A source link whose target is outside the source directory (a file, or a directory
    holding files) is a refused name for both, before anything is copied; a link that stays
    inside is a file like the others."""
    outside = tree / "outside"
    (outside / "d").mkdir(parents=True)
    (outside / "secret.dat").write_bytes(b"s" * 10)
    (outside / "d" / "f.dat").write_bytes(b"d" * 10)
    (tree / "src" / "out.dat").symlink_to(outside / "secret.dat")
    (tree / "src" / "sub").symlink_to(outside / "d")
    (tree / "src" / "in.dat").symlink_to(tree / "src" / "f1.dat")
    if files == "from":
        (tree / "list.txt").write_text("f0.dat 1000\nout.dat 10\nsub/f.dat 10\nin.dat 1000\n")
        files = f"{{from: {tree}/list.txt}}"
    recursive = ", recursive: true" if files.startswith("{glob") else ""
    spec = _spec(tree, f'  - {{tier: A, pool: ["file://{tree}/dst/a/"]}}\n',
                 files=files.replace("}", f"{recursive}}}"))
    assert main(["campaign", "run", "--dry-run", str(spec)]) == 3
    out, err = capsys.readouterr()
    assert "2 with names refused (they would fail)" in out, out
    assert "a run of d would fail files: 2 files have names gridxfer refuses" in err
    assert main(["campaign", "run", "--quiet", "--json", str(spec)]) == 3   # as the run does
    failed = {f["name"]: f for f in json.loads(capsys.readouterr().out)["failed_files"]}
    assert set(failed) == {"out.dat", "sub/f.dat"}, failed
    assert {f["error_class"] for f in failed.values()} == {"bad_name"}
    assert all("resolves outside" in f["error_msg"] for f in failed.values()), failed
    assert not (tree / "dst" / "a" / "out.dat").exists()
    assert not (tree / "dst" / "a" / "sub").exists()


@pytest.mark.parametrize("bad, says", [
    (["--on-drop", "true"], "alerts need a threshold"),
    (["--alert-floor", "5"], "need --alert-cmd-file or --on-drop"),
    (["--on-drop", "no-such-command-gx", "--alert-floor", "5"], "--on-drop: no such command"),
    (["--on-drop", "true", "--alert-floor", "5", "--alert-window", "400d"], "--alert-window"),
    (["--on-drop", "true", "--alert-baseline", "1.5"], "--alert-baseline"),
    (["--alert-tape-wait", "1h"], "need --alert-cmd-file or --on-drop"),
    (["--on-drop", "true", "--alert-tape-wait", "0s"], "--alert-tape-wait"),
], ids=["no-threshold", "no-sink", "no-command", "window", "baseline", "tape-no-sink",
        "tape-wait"])
def test_alert_options_are_refused_as_the_run_refuses_them(tree, capsys, bad, says):
    spec = _spec(tree, f'  - {{tier: A, pool: ["file://{tree}/dst/a/"]}}\n')
    for how in (["--dry-run"], ["--dry-run", "--no-probe"], ["--quiet"]):
        assert main(["campaign", "run", *how, *bad, str(spec)]) == 2, how
        out, err = capsys.readouterr()
        assert says in err and len(err.splitlines()) == 1, (how, err)
        assert "would transfer" not in out, how
    assert not (tree / "dst").exists()                      # nothing probed, nothing copied
    assert main(["campaign", "run", "--quiet", str(spec)]) == 0     # no journal was left
    capsys.readouterr()
    assert main(["campaign", "resume", "--dry-run", *bad, "d"]) == 2    # resume's too
    assert says in capsys.readouterr().err
