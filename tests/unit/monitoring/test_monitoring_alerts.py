"""DropAlerter: passive Nagios results / hook on a sustained throughput drop."""
from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from gridxfer.errors import UsageError
from gridxfer.monitoring.alerts import CRITICAL, OK, WARNING, DropAlerter

MB = 1e6


def feed(alerter: DropAlerter, samples: list[tuple[float, float]]) -> None:
    for now, rate in samples:
        alerter.observe(now, rate)


def test_floor_breach_must_last_a_whole_window(tmp_path):
    cmd = tmp_path / "nagios.cmd"
    a = DropAlerter(campaign="c1", floor_bytes_per_s=100 * MB, baseline_fraction=None,
                    window=60, cmd_file=cmd, on_drop=None, host="se01")
    # 55 s below the floor, then back: no alert
    feed(a, [(t, 50 * MB) for t in range(0, 56, 5)] + [(60, 200 * MB)])
    assert a.events == [] and not cmd.exists()
    # now a real drop: alert exactly once, at the end of the window
    feed(a, [(t, 50 * MB) for t in range(100, 200, 5)])
    assert [e.code for e in a.events] == [CRITICAL]
    assert a.events[0].ts == 160
    # recovery writes OK once
    feed(a, [(t, 150 * MB) for t in range(200, 260, 5)])
    assert [e.code for e in a.events] == [CRITICAL, OK]
    lines = cmd.read_text().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("[160] PROCESS_SERVICE_CHECK_RESULT;se01;gridxfer_throughput;2;"
                               "THROUGHPUT CRITICAL - campaign c1: 50.0 MB/s, below floor")
    assert lines[0].endswith("|throughput_MBps=50.000;;100:;0")
    assert ";0;THROUGHPUT OK" in lines[1]


def test_baseline_drop_gives_warning_after_warmup():
    a = DropAlerter(campaign="c", floor_bytes_per_s=None, baseline_fraction=0.5, window=30,
                    cmd_file=None, on_drop=None, host="h")
    # a deep drop before the baseline is established must not alert
    feed(a, [(t, 1 * MB) for t in range(0, 20)])
    assert a.events == []
    a2 = DropAlerter(campaign="c", floor_bytes_per_s=None, baseline_fraction=0.5, window=30,
                     cmd_file=None, on_drop=None, host="h")
    feed(a2, [(t, 100 * MB) for t in range(0, 120, 2)])
    assert a2.baseline_bytes_per_s == pytest.approx(100 * MB)
    feed(a2, [(t, 40 * MB) for t in range(120, 200, 2)])
    assert [e.code for e in a2.events] == [WARNING]
    assert "% of baseline 9" in a2.events[0].output          # ~41% of ~97 MB/s
    # the baseline learns from the drop only slowly (4x slower): still far above 40 MB/s
    assert a2.baseline_bytes_per_s > 85 * MB


def test_startup_burst_is_averaged_not_locked_in():
    """Found by the 10-minute soak: a burst in the first seconds must not become a
    baseline that the steady rate then 'drops' below for ever."""
    a = DropAlerter(campaign="c", floor_bytes_per_s=0.5 * MB, baseline_fraction=0.5, window=60,
                    cmd_file=None, on_drop=None, host="h")
    feed(a, [(0.5, 40 * MB), (1.0, 30 * MB)] + [(t, 2 * MB) for t in range(2, 900)])
    assert a.events == []
    assert a.baseline_bytes_per_s == pytest.approx(2 * MB, rel=0.05)
    # a lasting new level is learnt in the end: the baseline alert resolves itself
    feed(a, [(t, 0.8 * MB) for t in range(900, 4000)])
    assert [e.code for e in a.events] == [WARNING, OK]


def test_fifo_with_reader_and_without(tmp_path):
    fifo = tmp_path / "nagios.cmd"
    os.mkfifo(fifo)
    a = DropAlerter(campaign="c", floor_bytes_per_s=10 * MB, baseline_fraction=None, window=1,
                    cmd_file=fifo, on_drop=None, host="h")
    # no reader: must not block, the event is recorded as undelivered
    t0 = time.monotonic()
    feed(a, [(0, 0), (2, 0)])
    assert time.monotonic() - t0 < 2
    assert a.events[-1].delivered is False
    got: list[bytes] = []
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)   # a reader, as nagios keeps one open
    try:
        feed(a, [(3, 20 * MB)])
        got.append(os.read(fd, 4096))
    finally:
        os.close(fd)
    assert a.events[-1].delivered is True
    assert got[0].decode().startswith("[3] PROCESS_SERVICE_CHECK_RESULT;h;gridxfer_throughput;0;")


def test_hook_runs_once_per_state_change_with_env(tmp_path):
    out = tmp_path / "hook.log"
    script = tmp_path / "hook.py"
    script.write_text("import os, sys\n"
                      "with open(sys.argv[1], 'a') as f:\n"
                      "    f.write(os.environ['GRIDXFER_ALERT_STATE'] + ' ' +\n"
                      "            os.environ['GRIDXFER_CAMPAIGN'] + ' ' + sys.argv[2] + '\\n')\n")
    a = DropAlerter(campaign="camp", floor_bytes_per_s=10 * MB, baseline_fraction=None,
                    window=5, cmd_file=None, on_drop=f"{sys.executable} {script} {out} 'a b'",
                    host="h")
    feed(a, [(t, 1 * MB) for t in range(0, 20)] + [(21, 50 * MB), (22, 50 * MB)])
    a.close()
    assert out.read_text().splitlines() == ["CRITICAL camp a b", "OK camp a b"]


def test_a_hook_gone_since_the_start_does_not_break_the_campaign(tmp_path):
    hook = tmp_path / "hook"
    hook.write_text("#!/bin/sh\n")
    hook.chmod(0o755)
    a = DropAlerter(campaign="c", floor_bytes_per_s=10 * MB, baseline_fraction=None, window=1,
                    cmd_file=None, on_drop=f"{hook} --x", host="h")
    hook.unlink()
    feed(a, [(0, 0), (5, 0)])
    assert a.events[-1].hook_started is False


@pytest.mark.parametrize("kwargs, line", [
    (dict(window=0), "window"), (dict(baseline_fraction=1.5), "baseline"),
    (dict(floor_bytes_per_s=-1), "floor"), (dict(on_drop="  "), "--on-drop: empty command"),
    (dict(host="a;b"), "host"),
    (dict(on_drop='echo "unterminated'), "--on-drop: cannot split the command line"),
    (dict(on_drop="/nonexistent/hook --x"), "--on-drop: no such command: '/nonexistent/hook'"),
    (dict(on_drop="echo --token=eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"),
     "--on-drop: the command line carries a credential"),
    (dict(on_drop="curl https://alice:SECRET@example.org/"),
     "--on-drop: the command line carries a credential")])
def test_bad_arguments(kwargs, line):
    base = dict(campaign="c", floor_bytes_per_s=None, baseline_fraction=None, window=10,
                cmd_file=None, on_drop=None)
    base.update(kwargs)
    with pytest.raises(UsageError) as err:
        DropAlerter(**base)
    assert line.lower() in str(err.value).lower()
    assert "SECRET" not in str(err.value) and "eyJ" not in str(err.value)


def test_concurrent_writes_to_regular_file_stay_whole_lines(tmp_path):
    cmd = tmp_path / "cmd"
    alerters = [DropAlerter(campaign=f"c{i}", floor_bytes_per_s=1.0, baseline_fraction=None,
                            window=1, cmd_file=cmd, on_drop=None, host="h") for i in range(8)]

    def run(a: DropAlerter) -> None:
        for k in range(20):
            feed(a, [(4 * k, 0), (4 * k + 2, 0), (4 * k + 3, 5)])

    threads = [threading.Thread(target=run, args=(a,)) for a in alerters]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = cmd.read_text().splitlines()
    assert len(lines) == 8 * 40
    assert all(line.count("PROCESS_SERVICE_CHECK_RESULT") == 1 for line in lines)
