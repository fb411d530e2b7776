"""`-v`/`-vv` and `--log-file` on every gridxfer command (cli/logs.py), before or after
the subcommand; log lines are redacted and one line each."""
from __future__ import annotations

import logging
import re

import pytest

from gridxfer.cli.main import main
from tests.cli import test_campaign_cli as base
from tests.cli.test_campaign_cli import campaign

local = base.local      # the fixture: a local test mover and six source files

TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSIsInNjb3BlIjoic3RvcmFnZS5yZWFkOi8ifQ.c2lnbmF0dXJl"


@pytest.mark.parametrize("argv", [
    ["-v", "campaign", "list"],
    ["campaign", "-v", "list"],
    ["campaign", "list", "-vv"],
    ["tune", "list", "-v"],
    ["testbed", "status", "--verbose"],
])
def test_every_command_takes_verbose(gridxfer_home, capsys, argv):
    code = main(argv)
    err = capsys.readouterr().err
    assert "no such option" not in err, err
    assert code in (0, 1), err


def test_log_file_records_the_campaign_with_iso_times_and_no_token(local, tmp_path, capsys):
    spec = campaign(local, files='["f0.dat", {name: gone.dat, size: 5}, "f1.dat"]')
    log = tmp_path / "run.log"
    assert main(["campaign", "run", "--quiet", "-vv", "--log-file", str(log), str(spec)]) == 3
    err = capsys.readouterr().err
    assert "gridxfer: INFO: campaign c1 planned: 3 files" in err
    text = log.read_text()
    lines = text.splitlines()
    assert all(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ", ln) for ln in lines), text
    assert any("failed T1 gone.dat" in ln and "source_missing" in ln for ln in lines), text
    assert any("DEBUG" in ln and "done T1 f0.dat" in ln for ln in lines), text

    logging.getLogger("gridxfer.test").warning("token %s at\nroot://h//x", TOKEN)
    after = log.read_text()[len(text):]
    assert TOKEN not in after and after.count("\n") == 1, after
    assert TOKEN not in capsys.readouterr().err


def test_without_v_info_stays_off_stderr(local, capsys):
    assert main(["campaign", "run", "--quiet", str(campaign(local))]) == 0
    assert "INFO" not in capsys.readouterr().err


def test_log_file_in_a_missing_directory_is_one_line_exit_2(gridxfer_home, tmp_path, capsys):
    assert main(["campaign", "list", "--log-file", str(tmp_path / "no" / "x.log")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such directory" in err


def test_a_librarys_own_log_line_does_not_reach_stderr(gridxfer_home, capsys, monkeypatch):
    """paramiko logs "Socket exception ..." with no handler of its own: without one, Python's
    last-resort handler would print it, unredacted, beside the ssh target's own warning."""
    monkeypatch.setattr(logging.getLogger(), "handlers", [])       # as outside pytest
    monkeypatch.setattr(logging.getLogger("paramiko"), "handlers", [])
    assert main(["tune", "list"]) == 0
    capsys.readouterr()
    logging.getLogger("paramiko.transport").error("Socket exception: Connection reset (104)")
    assert capsys.readouterr().err == ""
