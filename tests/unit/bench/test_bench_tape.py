"""bench.tape: the drives' span (first mount done -> last byte written) from CTA lines the
emulated tape writes; Retrieve sessions do not count."""
from __future__ import annotations

import time

import pytest

from bench.tape import drive_span
from gridxfer.testbed.tape import EmulatedTape, TapeConfig, _Session


def test_drive_span_from_the_emulated_log(tmp_path):
    log = tmp_path / "cta.log"
    tape = EmulatedTape(TapeConfig(buffer=tmp_path, log=log, drives=2))
    now = time.time()
    # drive 0: mounted 100 s ago for 2 s, 0.5 s positioning, 50 s writing 900 MB
    tape._log(0, _Session(vid="V1", started=now - 100, mount_time=2.0, files=1,
                          bytes=900_000_000, write_time=50.0, position_time=0.5))
    tape._log(1, _Session(vid="V2", started=now - 60, mount_time=2.0, files=1,
                          bytes=100_000_000, write_time=10.0, position_time=0.5))
    tape._log(1, _Session(vid="V3", started=now - 30, mount_time=2.0, files=1,
                          bytes=7, write_time=1.0, position_time=0.5, kind="retrieve"))
    first, last, written = drive_span(log)
    assert written == 1_000_000_000
    assert first == pytest.approx(now - 98, abs=0.05)
    assert last == pytest.approx(max(now - 98 + 50.5, now - 58 + 10.5), abs=0.05)


def test_no_session_no_span(tmp_path):
    log = tmp_path / "cta.log"
    log.write_text("")
    assert drive_span(log) is None
