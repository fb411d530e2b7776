"""Tape alerts: a bound exceeded for a whole window sends ONE passive result on the
gridxfer_tape service (backlog: WARNING, wait: CRITICAL), recovery and the end send OK,
through the same command-file path as the throughput alerts."""
from __future__ import annotations

import pytest

from gridxfer.errors import UsageError
from gridxfer.monitoring.alerts import DropAlerter
from gridxfer.monitoring.tapealerts import SERVICE, TapeAlerter


def _alerter(tmp_path, **kw):
    sender = DropAlerter(campaign="c1", floor_bytes_per_s=None, baseline_fraction=None,
                         window=10, cmd_file=tmp_path / "nagios.cmd", on_drop=None, host="h1",
                         service=SERVICE)
    return TapeAlerter(sender, window=10, **kw), tmp_path / "nagios.cmd"


def _lines(path):
    return path.read_text().splitlines() if path.exists() else []


def test_backlog_then_wait_then_recovery_then_end(tmp_path):
    a, cmd = _alerter(tmp_path, max_backlog=100, max_wait=3600)
    a.observe(0, 150, 60)
    a.observe(9, 150, 60)
    assert _lines(cmd) == [] and a.state == "OK"             # not for a whole window yet
    a.observe(10, 150, 60)
    (line,) = _lines(cmd)
    assert line.startswith("[10] PROCESS_SERVICE_CHECK_RESULT;h1;gridxfer_tape;1;TAPE WARNING")
    assert "150 files waiting for tape (> 100)" in line and "archive_backlog=150;100;;0" in line
    a.observe(11, 150, 60)
    assert len(_lines(cmd)) == 1                              # once per state change
    a.observe(12, 150, 3601)
    a.observe(22, 150, 3611)
    assert a.state == "CRITICAL" and ";2;TAPE CRITICAL" in _lines(cmd)[-1]
    assert "(> 1h" in _lines(cmd)[-1]
    a.observe(23, 10, 5)
    assert a.state == "OK" and "back under the bounds" in _lines(cmd)[-1]
    a.finish(30, "done, 150/150 files done")
    assert ";0;TAPE OK - campaign c1" in _lines(cmd)[-1] and "campaign ended" in _lines(cmd)[-1]
    assert len(_lines(cmd)) == 4


def test_a_short_spike_does_not_alert(tmp_path):
    a, cmd = _alerter(tmp_path, max_backlog=5, max_wait=None)
    for t in range(0, 30, 2):
        a.observe(t, 6 if t % 8 else 0, None)                 # drops back under before 10 s
    assert _lines(cmd) == []


def test_tape_alerts_need_a_bound(tmp_path):
    with pytest.raises(UsageError):
        _alerter(tmp_path, max_backlog=None, max_wait=None)
