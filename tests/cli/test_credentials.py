"""No credential in any output: real `gridxfer` processes on a file:// campaign.

The campaign file is clean (credentials in it are refused, tests/unit/test_redact.py);
credentials arrive by the other routes: names from the source listing, a command-line
argument, and a journal written by an older gridxfer. Every output is searched for them:
stdout/stderr of run/status/report (text and --json), the journal's bytes, the .prom
files and the Nagios check's status line and perfdata."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from gridxfer.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SECRETS = ("SECRET1", "SECRET2", "SECRET3", "hunter2")


def _env(home: Path) -> dict[str, str]:
    return dict(os.environ, GRIDXFER_HOME=str(home),
                PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))


def _run(home: Path, *argv: str) -> str:
    p = subprocess.run([sys.executable, *argv], env=_env(home), capture_output=True,
                       text=True, timeout=120)
    assert "Traceback" not in p.stderr, p.stderr
    return p.stdout + p.stderr


def _outputs(home: Path, tmp: Path, name: str) -> str:
    gx = ("-m", "gridxfer", "campaign")
    out = [_run(home, *gx, "status", name), _run(home, *gx, "status", "--json", "--links", name),
           _run(home, *gx, "report", name), _run(home, *gx, "report", "--json", name),
           _run(home, "-m", "gridxfer.monitoring.prometheus", "--prom-file",
                str(tmp / "c.prom"), "--campaign", name),
           _run(home, str(ROOT / "checks" / "check_gridxfer_throughput"), "-C", name,
                "--per-endpoint", "-W", "1h", "--idle", "ok", "--no-learn",
                "--prom-file", str(tmp / "check.prom"))]
    return "\n".join(out + [(tmp / "c.prom").read_text(), (tmp / "check.prom").read_text()])


def _journal_bytes(home: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (home / "campaigns").iterdir())


def test_no_secret_in_any_output(tmp_path, gridxfer_home):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    for name in ("a.dat", "b.dat", "g.dat?authz=SECRET1", "h%3Faccess_token%3DSECRET2.dat"):
        (src / name).write_bytes(os.urandom(3000))
    spec = tmp_path / "c.yaml"
    spec.write_text(f'campaign: cred\nsource: {{url: "file://{src}/", files: {{glob: "*"}}}}\n'
                    f'destinations:\n  - tier: T1\n    pool: ["file://{dst}/"]\n'
                    f'retries: {{max: 0, backoff: 0s}}\n')
    text = _run(gridxfer_home, "-m", "gridxfer", "campaign", "run", "--quiet", str(spec))
    assert "2/4 files done, 2 failed" in text and "carries a credential" in text
    text += _run(gridxfer_home, "-m", "gridxfer", "campaign", "run", "--json", "--replace",
                 str(spec))
    # a credential given on the command line is not echoed either
    text += _run(gridxfer_home, "-m", "gridxfer", "campaign", "status", "root://bob:SECRET3@h//x")
    text += _outputs(gridxfer_home, tmp_path, "cred")
    assert sorted(p.name for p in dst.iterdir()) == ["a.dat", "b.dat"]
    found = [s for s in SECRETS if s in text or s.encode() in _journal_bytes(gridxfer_home)]
    assert found == [], text


def test_a_journal_of_an_older_version_is_redacted_on_output(tmp_path, gridxfer_home):
    """Journals written before credentials were refused may hold them: every reader
    redacts (status, report, JSON, Prometheus labels, perfdata labels)."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    (src / "a.dat").write_bytes(b"x" * 5000)
    spec = tmp_path / "c.yaml"
    spec.write_text(f'campaign: old\nsource: {{url: "file://{src}/", files: {{glob: "*"}}}}\n'
                    f'destinations:\n  - tier: T1\n    pool: ["file://{dst}/"]\n')
    _run(gridxfer_home, "-m", "gridxfer", "campaign", "run", "--quiet", str(spec))
    conn = sqlite3.connect(gridxfer_home / "campaigns" / "old.sqlite")
    with conn:
        conn.execute("UPDATE attempts SET endpoint='root://bob:hunter2@h//d/', "
                     "status='failed', error_class='other', error_msg='open ?authz=SECRET1 failed'")
        conn.execute("UPDATE files SET endpoint='root://bob:hunter2@h//d/', state='failed', "
                     "error_msg='open ?authz=SECRET1 failed'")
    conn.close()
    text = _outputs(gridxfer_home, tmp_path, "old")
    assert "root://bob:***@h" in text
    assert [s for s in SECRETS if s in text] == [], text


@pytest.mark.parametrize("url", ["root://bob:hunter2@host//x/", "root://host//x/?authz=hunter2"])
def test_campaign_file_with_a_credential_exits_2(tmp_path, gridxfer_home, capsys, url):
    spec = tmp_path / "c.yaml"
    spec.write_text(f'campaign: c\nsource: {{url: "{url}", files: {{glob: "*"}}}}\n'
                    f'destinations:\n  - tier: T1\n    pool: ["file://{tmp_path}/d/"]\n')
    for argv in (["campaign", "run", "--quiet", str(spec)],
                 ["campaign", "run", "--dry-run", str(spec)]):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.strip().splitlines()) == 1
        assert err.startswith(f"gridxfer: error: {spec}:2: source.url: the URL ")
        assert "hunter2" not in err and "X509_USER_PROXY" in err
    assert not (gridxfer_home / "campaigns" / "c.sqlite").exists()
