"""The GRIDXFER_* environment a command starts in: a bad value is refused before the command
does anything, in one line naming the variable, exit 2 -- GRIDXFER_HOME that is a file or
relative, and a GRIDXFER_PROGRESS_EVERY that is not a duration, with --quiet and --dry-run
too (where the live view, the one reader of it, never starts)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gridxfer.cli.main import main

SRC = Path(__file__).resolve().parents[2] / "src"


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gridxfer: error: "), err
    return err.strip()


@pytest.fixture
def campaign_file(gridxfer_home, tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "f.dat").write_bytes(b"x" * 100)
    path = tmp_path / "c.yaml"
    path.write_text(f"""campaign: envcheck
source: {{url: "file://{tmp_path}/src/", files: {{glob: "*"}}}}
destinations:
  - {{tier: A, pool: ["file://{tmp_path}/dst/"]}}
""")
    return path


@pytest.mark.parametrize("home, line", [
    ("/etc/passwd", "GRIDXFER_HOME='/etc/passwd': not a directory"),
    ("/etc/passwd/gridxfer", "GRIDXFER_HOME='/etc/passwd/gridxfer': not a directory "
                             "(/etc/passwd is not a directory)"),
])
def test_a_home_that_is_not_a_directory_is_named(monkeypatch, capsys, home, line):
    monkeypatch.setenv("GRIDXFER_HOME", home)
    assert main(["campaign", "list"]) == 2
    assert _one_line_error(capsys) == f"gridxfer: error: {line}"


def test_a_relative_home_is_refused_not_created(monkeypatch, capsys, tmp_path):
    """A cron job or a daemon runs in another directory than the shell that set it: a
    relative GRIDXFER_HOME would be another state there, so it is refused (not resolved)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GRIDXFER_HOME", "gxstate")
    assert main(["campaign", "list"]) == 2
    line = _one_line_error(capsys)
    assert line.startswith("gridxfer: error: GRIDXFER_HOME='gxstate': not an absolute path")
    assert not (tmp_path / "gxstate").exists()


def test_a_home_that_does_not_exist_yet_is_made(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("GRIDXFER_HOME", str(tmp_path / "new" / "home"))
    assert main(["campaign", "list"]) == 0
    assert (tmp_path / "new" / "home").is_dir()


@pytest.mark.parametrize("flags", [["--quiet"], ["--dry-run"], ["--json"], []])
@pytest.mark.parametrize("raw, why", [
    ("abc", "not a duration: 'abc'"),
    ("0s", "must be more than 0"),
    ("400d", "above the limit 366d"),
])
def test_a_bad_progress_interval_is_refused_whatever_the_flags(campaign_file, monkeypatch,
                                                               capsys, flags, raw, why):
    monkeypatch.setenv("GRIDXFER_PROGRESS_EVERY", raw)
    assert main(["campaign", "run", *flags, str(campaign_file)]) == 2
    line = _one_line_error(capsys)
    assert line.startswith(f"gridxfer: error: GRIDXFER_PROGRESS_EVERY={raw!r}: {why}"), line
    assert not (campaign_file.parent / "dst").exists()
    assert not (Path(os.environ["GRIDXFER_HOME"]) / "campaigns" / "envcheck.sqlite").exists()


def test_a_good_progress_interval_runs(campaign_file, monkeypatch, capsys):
    monkeypatch.setenv("GRIDXFER_PROGRESS_EVERY", "5m")
    assert main(["campaign", "run", "--quiet", str(campaign_file)]) == 0
    assert (campaign_file.parent / "dst" / "f.dat").read_bytes() == b"x" * 100


def test_the_installed_command_says_it_in_one_line(tmp_path):
    """The real process: no traceback, exit 2, the one line."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC), "GRIDXFER_HOME": "/etc/passwd"}
    proc = subprocess.run([sys.executable, "-m", "gridxfer", "tune", "list"], env=env,
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert (proc.returncode, proc.stderr) == (
        2, "gridxfer: error: GRIDXFER_HOME='/etc/passwd': not a directory\n")
