"""`resume` and an edited campaign file (issue 22): the changes are shown, the safe ones
applied with --reload, the others refused with a reason and nothing applied. The files move
with gridxfer's own file:// route (the real mover, which refuses to overwrite)."""
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


def _write(tmp_path, extra: str = "", src: str = "src"):
    path = tmp_path / "r.yaml"
    path.write_text(f"""campaign: r
source: {{url: "file://{tmp_path}/{src}/", files: {{glob: "*.dat"}}}}
destinations:
  - {{tier: T1, pool: ["file://{tmp_path}/dst/t1/"], max_active: 2}}
retries: {{max: 1, backoff: 0.01s}}
{extra}""")
    return path


def _meta(home, key):
    conn = sqlite3.connect(home / "campaigns" / "r.sqlite")
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None
    finally:
        conn.close()


def test_overwrite_after_exists_hint_show_reload(local, gridxfer_home, capsys):
    (local / "dst" / "t1").mkdir(parents=True)
    (local / "dst" / "t1" / "f0.dat").write_bytes(b"old")
    spec = _write(local)
    assert main(["campaign", "run", "--quiet", str(spec)]) == 3
    err = capsys.readouterr().err
    assert "1 exist at the destination: set `overwrite: true` in the campaign file, then " \
           "`gridxfer campaign resume r --reload --retry-failed`" in err, err

    _write(local, "overwrite: true\n")
    # without --reload: shown, not applied, and the file still fails as before
    assert main(["campaign", "resume", "--quiet", "--retry-failed", "r"]) == 3
    out = capsys.readouterr().out
    assert f"campaign file {spec} changed since the journal was planned:" in out
    assert "  overwrite: false -> true\n" in out
    assert "not applied: `gridxfer campaign resume r --reload` applies them" in out
    assert json.loads(_meta(gridxfer_home, "spec"))["overwrite"] is False

    assert main(["campaign", "resume", "--quiet", "--retry-failed", "--reload", "r"]) == 0
    out = capsys.readouterr().out
    assert "  overwrite: false -> true\n  applied (--reload)" in out, out
    assert json.loads(_meta(gridxfer_home, "spec"))["overwrite"] is True
    assert (local / "dst" / "t1" / "f0.dat").read_bytes() == (local / "src" / "f0.dat").read_bytes()
    # applied: nothing left to show
    assert main(["campaign", "resume", "--quiet", "r"]) == 0
    assert "changed since" not in capsys.readouterr().out


def test_safe_changes_applied_in_json(local, gridxfer_home, capsys):
    spec = _write(local)
    assert main(["campaign", "run", "--quiet", str(spec)]) == 0
    text = spec.read_text().replace("max_active: 2", "max_active: 5, streams: 2")
    spec.write_text(text.replace("max: 1, backoff: 0.01s", "max: 4, backoff: 1s")
                    + "timeout: 20m\n")
    capsys.readouterr()
    assert main(["campaign", "resume", "--json", "--reload", "r"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["run"]["reloaded"] is True
    got = {c["field"]: (c["old"], c["new"], c["safe"]) for c in res["run"]["edited"]["changes"]}
    assert got == {"destinations[T1].max_active": (2, 5, True),
                   "destinations[T1].streams": (1, 2, True),
                   "retries.max": (1, 4, True), "retries.backoff": (0.01, 1.0, True),
                   "timeout": (3600.0, 1200.0, True)}
    stored = json.loads(_meta(gridxfer_home, "spec"))
    assert stored["destinations"][0]["max_active"] == 5 and stored["timeout"] == 1200.0


def test_unsafe_changes_refused_with_reasons(local, gridxfer_home, capsys):
    spec = _write(local)
    assert main(["campaign", "run", "--quiet", str(spec)]) == 0
    before = _meta(gridxfer_home, "spec")
    (local / "src2").mkdir()
    text = _write(local, "overwrite: true\nchecksum: {verify: source}\n", src="src2").read_text()
    spec.write_text(text.replace("- {tier: T1",
                                 '- {tier: T2, pool: ["file:///x/"]}\n  - {tier: T1'))
    capsys.readouterr()
    assert main(["campaign", "resume", "--quiet", "--reload", "r"]) == 2
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert lines[0] == (f"gridxfer: error: campaign r: {spec} has 3 change(s) a started "
                        f"campaign cannot take; nothing was applied; undo them or start again "
                        f"with `gridxfer campaign run FILE --replace`")
    assert lines[1].startswith("gridxfer: error:   checksum.verify: \"both\" -> \"source\" "
                               "(refused: the files already done were verified the old way")
    assert lines[2].startswith("gridxfer: error:   destinations[T2]: (none) -> \"a tier\" "
                               "(refused: a tier added or removed")
    assert lines[3].startswith(f"gridxfer: error:   source.url: \"file://{local}/src/\" -> "
                               f"\"file://{local}/src2/\" (refused: the journal's files were "
                               f"planned from the old source")
    assert len(lines) == 4 and out == ""
    assert _meta(gridxfer_home, "spec") == before          # nothing applied
    # without --reload: shown (safe and refused), the run goes on with the journal's spec
    assert main(["campaign", "resume", "--quiet", "r"]) == 0
    out = capsys.readouterr().out
    assert "  overwrite: false -> true\n" in out and "(refused: " in out
    assert "applies them once the refused ones are undone" in out


def test_reload_with_a_broken_file(local, gridxfer_home, capsys):
    spec = _write(local)
    assert main(["campaign", "run", "--quiet", str(spec)]) == 0
    spec.write_text(spec.read_text() + "retries: {max: 2}\n")       # a duplicate key
    capsys.readouterr()
    assert main(["campaign", "resume", "--quiet", "r"]) == 0
    assert "was edited but cannot be read: " in capsys.readouterr().out
    assert main(["campaign", "resume", "--quiet", "--reload", "r"]) == 2
    assert "--reload: " in capsys.readouterr().err
    spec.unlink()
    assert main(["campaign", "resume", "--quiet", "--reload", "r"]) == 2
    assert "is not there" in capsys.readouterr().err
