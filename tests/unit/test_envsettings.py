"""envsettings: the numeric GRIDXFER_* variables. A command refuses a bad value with one
line and exit 2 before it runs (check); the code's readers never raise (value)."""
from __future__ import annotations

import math
import subprocess
import sys

import pytest

from gridxfer import envsettings
from gridxfer.errors import UsageError, exit_code_for


@pytest.mark.parametrize("setting", envsettings.SETTINGS.values(), ids=envsettings.SETTINGS)
def test_every_default_is_within_its_own_bounds(setting):
    assert setting.low <= setting.default <= setting.high
    assert setting.parse(str(setting.default)) == setting.default
    assert not setting.whole or setting.default == int(setting.default)


@pytest.mark.parametrize("raw, line", [
    ("abc", "GRIDXFER_XRD_CHECKSUM_SLOTS='abc': not a whole number (default 4)"),
    ("2.5", "GRIDXFER_XRD_CHECKSUM_SLOTS='2.5': not a whole number (default 4)"),
    ("0", "GRIDXFER_XRD_CHECKSUM_SLOTS='0': must be between 1 and 64"),
    ("65", "GRIDXFER_XRD_CHECKSUM_SLOTS='65': must be between 1 and 64"),
])
def test_check_refuses_a_bad_count_in_one_line(raw, line):
    with pytest.raises(UsageError) as err:
        envsettings.check({"GRIDXFER_XRD_CHECKSUM_SLOTS": raw})
    assert str(err.value) == line and exit_code_for(err.value) == 2


@pytest.mark.parametrize("raw", ["x", "nan", "inf", "-inf", "0.5", "-3", "1e999"])
def test_check_refuses_a_time_that_is_not_a_finite_number_within_bounds(raw):
    with pytest.raises(UsageError, match="^GRIDXFER_XRD_STALL_TIMEOUT="):
        envsettings.check({"GRIDXFER_XRD_STALL_TIMEOUT": raw})


@pytest.mark.parametrize("env", [{}, {"GRIDXFER_XRD_STALL_TIMEOUT": " 30 "},
                                 {"GRIDXFER_XRD_NEAR_MS": "0", "GRIDXFER_RELAY_PROCS": "16"},
                                 {"GRIDXFER_HTTP_DIGEST_SLOTS": ""}, {"GRIDXFER_OTHER": "x"}])
def test_check_takes_good_unset_and_empty_values(env):
    envsettings.check(env)


@pytest.mark.parametrize("raw, got", [(None, 120.0), ("", 120.0), ("45", 45.0), ("0", 1.0),
                                      ("-5", 1.0), ("x", 120.0), ("nan", 120.0),
                                      ("inf", math.inf)])
def test_a_reader_never_raises(monkeypatch, raw, got):
    if raw is None:
        monkeypatch.delenv("GRIDXFER_XRD_STALL_TIMEOUT", raising=False)
    else:
        monkeypatch.setenv("GRIDXFER_XRD_STALL_TIMEOUT", raw)
    assert envsettings.value("GRIDXFER_XRD_STALL_TIMEOUT") == got


def test_a_count_is_an_int_clamped_to_its_bounds(monkeypatch):
    monkeypatch.setenv("GRIDXFER_RELAY_PROCS", "99")
    assert envsettings.count("GRIDXFER_RELAY_PROCS") == 16
    monkeypatch.setenv("GRIDXFER_RELAY_PROCS", "3.7")
    assert envsettings.count("GRIDXFER_RELAY_PROCS") == 3


def test_a_command_refuses_a_bad_value_before_it_runs(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "GRIDXFER_HOME": str(tmp_path),
           "GRIDXFER_HTTP_DIGEST_SLOTS": "lots"}
    proc = subprocess.run([sys.executable, "-m", "gridxfer", "campaign", "list"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr == ("gridxfer: error: GRIDXFER_HTTP_DIGEST_SLOTS='lots': "
                           "not a whole number (default 4)\n")
    assert not (tmp_path / "journals").exists()


@pytest.mark.parametrize("name, raw", [("GRIDXFER_HTTP_TPC_MODE", "pul"),
                                       ("GRIDXFER_GRIDFTP", "globus"),
                                       ("GRIDXFER_XRD_NATIVE", "off"),
                                       ("GRIDXFER_WAN_EMULATION", "tc")])
def test_check_refuses_a_word_the_reader_would_take_for_the_default(name, raw):
    with pytest.raises(UsageError) as err:
        envsettings.check({name: raw})
    words = ", ".join(envsettings.CHOICES[name])
    assert str(err.value) == f"{name}={raw!r}: must be one of {words}"


@pytest.mark.parametrize("name, raw", [("GRIDXFER_HTTP_TPC_MODE", "PUSH"),
                                       ("GRIDXFER_GRIDFTP", " gfal2 "),
                                       ("GRIDXFER_GUC_ALWAYS", "yes"),
                                       ("GRIDXFER_DEMO_LOCAL", "")])
def test_check_takes_the_words_the_readers_know(name, raw):
    envsettings.check({name: raw})


def test_every_word_setting_is_documented_with_its_words():
    from pathlib import Path
    doc = (Path(__file__).parents[2] / "docs" / "ARCHITECTURE.md").read_text()
    for name in [*envsettings.SETTINGS, *envsettings.CHOICES]:
        assert f"`{name}`" in doc, name


@pytest.mark.parametrize("name, raw, line", [
    ("GRIDXFER_PROGRESS_EVERY", "soon",
     "GRIDXFER_PROGRESS_EVERY='soon': not a duration: 'soon' (try 30s, 18ms, 5m, 2h)"),
    ("GRIDXFER_PROGRESS_EVERY", "0", "GRIDXFER_PROGRESS_EVERY='0': must be more than 0 "
                                     "(default 30s)"),
    ("GRIDXFER_PROGRESS_EVERY", "-5s", "GRIDXFER_PROGRESS_EVERY='-5s': not a duration: '-5s' "
                                       "(try 30s, 18ms, 5m, 2h)"),
    ("GRIDXFER_DEMO_SIZE", "0MB", "GRIDXFER_DEMO_SIZE='0MB': must be more than 0 (default 64MB)"),
    ("GRIDXFER_DEMO_SIZE", "big", "GRIDXFER_DEMO_SIZE='big': not a size: 'big' "
                                  "(try 4096, 3MB, 16MiB)"),
    ("GRIDXFER_NS_TAG", "Run-1", "GRIDXFER_NS_TAG='Run-1': must be 1-8 chars of [a-z0-9]"),
])
def test_check_refuses_a_bad_quantity_or_form_naming_it(name, raw, line):
    with pytest.raises(UsageError) as err:
        envsettings.check({name: raw})
    assert str(err.value) == line and exit_code_for(err.value) == 2


def test_a_quantity_reader_never_raises(monkeypatch):
    monkeypatch.setenv("GRIDXFER_PROGRESS_EVERY", "90s")
    assert envsettings.quantity("GRIDXFER_PROGRESS_EVERY") == 90.0
    monkeypatch.setenv("GRIDXFER_PROGRESS_EVERY", "soon")
    assert envsettings.quantity("GRIDXFER_PROGRESS_EVERY") == 30.0
    monkeypatch.delenv("GRIDXFER_DEMO_SIZE", raising=False)
    assert envsettings.quantity("GRIDXFER_DEMO_SIZE") == 64e6


def test_every_setting_with_a_value_of_its_own_is_in_a_table():
    """Every GRIDXFER_* variable src/ reads is in one of envsettings' tables, or is a path
    (state.root checks GRIDXFER_HOME), or is one gridxfer sets for a hook: a new number
    read in a worker thread cannot escape the check at start."""
    import re
    from pathlib import Path
    src = Path(envsettings.__file__).parent
    used: set[str] = set()
    for path in src.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        used |= set(re.findall(r"environ(?:\.get)?\(\s*[\"'](GRIDXFER_[A-Z0-9_]+)", text))
        used |= set(re.findall(r"environ\[[\"'](GRIDXFER_[A-Z0-9_]+)", text))
    checked = {*envsettings.SETTINGS, *envsettings.QUANTITIES, *envsettings.CHOICES,
               *envsettings.FORMS}
    paths = {"GRIDXFER_HOME", "GRIDXFER_PROFILE_PATH", "GRIDXFER_SYSCTL_DIR",
             "GRIDXFER_SPOOL", "GRIDXFER_TESTBED_DIR"}
    assert used, "the pattern found no reader"
    assert used - checked - paths == set()
