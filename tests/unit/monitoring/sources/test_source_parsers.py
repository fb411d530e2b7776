"""Monitoring sources: journal window, CTA/dCache/JSONL parsing, tape aggregation, LogTail."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "fixtures" / "monitoring"))
from monfixtures import cta_json, cta_text, dcache_store, make_journal  # noqa: E402

from gridxfer.monitoring.sources import cta, dcache, jsonl  # noqa: E402
from gridxfer.monitoring.sources.journal import window_throughput  # noqa: E402
from gridxfer.monitoring.sources.tapelog import TapeSession, aggregate  # noqa: E402
from gridxfer.monitoring.sources.taperead import read_sessions  # noqa: E402

FIX = Path(__file__).resolve().parents[3] / "fixtures" / "monitoring"


def test_journal_window_prorates_overlapping_attempts(tmp_path):
    j = make_journal(tmp_path / "c.sqlite", [
        (0, 100, 1000, "se1"),          # half inside [50, 150]
        (60, 70, 500, "se2"),           # fully inside
        (140, 240, 1000, "se1", "failed"),  # 10% inside
        (200, 300, 999, "se1"),         # outside
        (100, None, 400, "se2"),        # running since 100: bytes so far over [100, now]
    ])
    wt = window_throughput([j], 100, now=150)
    assert wt.bytes == pytest.approx(500 + 500 + 100 + 400)
    assert wt.rate == pytest.approx(15.0)
    assert (wt.attempts, wt.active, wt.failed) == (4, 1, 1)
    assert wt.endpoint_rates() == pytest.approx({"se1": 6.0, "se2": 9.0})
    only = window_throughput([j], 100, now=150, endpoint="se2")
    assert only.bytes == pytest.approx(900)
    assert window_throughput([j], 10, now=1000, endpoint="se1").idle
    assert not window_throughput([j], 10, now=1000).idle      # se2 still running


def test_cta_text_and_json_give_the_same_session():
    p = cta.parser()
    t = p(cta_text(1_800_000_000.25, "D1", "V1", 18_000_000_000, 18.0), Path("x"))
    j = p(cta_json(1_800_000_000.25, "D1", "V1", 18_000_000_000, 18.0), Path("x"))
    assert t == j
    assert t.end == pytest.approx(1_800_000_000.25)
    assert t.duration == pytest.approx(1000.0)          # 18 GB at 18 MB/s payload
    assert (t.unit, t.vid, t.kind, t.bytes) == ("D1", "V1", "ArchiveForUser", 18_000_000_000)
    # session basis includes mount/positioning (+95 s in the fixture)
    s = cta.parser("session")(cta_text(1_800_000_000, "D1", "V1", 18_000_000_000, 18.0),
                              Path("x"))
    assert s.duration == pytest.approx(1095.0)


def test_cta_filters_and_garbage():
    p = cta.parser()
    assert p('LVL="INFO" MSG="Tape session statistics" tapeDrive="D1"', Path("x")) is None
    # a Retrieve session is not a write, but it is kept: it tells whether the drive works
    read = p(cta_text(1e9, "D1", "V", 10**9, 10.0, mount="Retrieve"), Path("x"))
    assert read is not None and not read.write and read.ok
    assert cta.parser(kinds=None)(cta_text(1e9, "D1", "V", 10**9, 10.0, mount="Retrieve"),
                                  Path("x")).write
    with pytest.raises(ValueError):
        p('MSG="Tape session finished" mountType="ArchiveForUser" dataVolume="1"',
          Path("x"))                                                 # no timestamp
    with pytest.raises(ValueError):
        p('{"message": "Tape session finished", "mountType": "ArchiveForUser", '
          '"epoch_time": "soon"}', Path("x"))


def test_cta_syslog_timestamp():
    line = ('Nov  3 10:11:12.500000 tpsrv01 cta-taped: LVL="INFO" MSG="Tape session finished" '
            'tapeDrive="D7" mountType="ArchiveForRepack" dataVolume="2000000000" '
            'totalTime="100" payloadTransferSpeedMBps="20"')
    s = cta.parser()(line, Path("x"))
    lt = time.localtime(s.end)
    assert lt.tm_year in (time.localtime().tm_year, time.localtime().tm_year - 1)
    assert (lt.tm_mon, lt.tm_mday, lt.tm_hour, lt.tm_min, lt.tm_sec) == (11, 3, 10, 11, 12)
    assert s.end % 1 == pytest.approx(0.5)


def test_dcache_store_records(tmp_path):
    ts = time.mktime((2026, 11, 21, 13, 45, 1, 0, 0, -1))
    line = dcache_store(ts, "pool_t1", 2_000_000_000, 100_000)
    s = dcache.parse(line, Path("billing-2026.11.21"))
    # the date is when the flush was queued: it ended queuingTime (17 ms) + 100 s later
    assert s == TapeSession(end=ts + 100.017, duration=100.0, bytes=2_000_000_000,
                            unit="pool_t1", vid="atlas:raw@osm", files=1, kind="store",
                            per_file=True)
    failed = dcache.parse(dcache_store(ts, "p", 10, 10, rc=41), Path("b"))
    assert not failed.ok and failed.bytes == 0                                   # failed flush
    transfer = line.replace(":store]", ":transfer]")
    assert dcache.parse(transfer, Path("b")) is None
    with pytest.raises(ValueError):
        dcache.parse("11.21 13:45:01 [pool:p:store] garbage", Path("b"))


def test_jsonl_source():
    s = jsonl.parse('{"end": 100, "bytes": 2000000, "rate_MBps": 2, "drive": "X"}', Path("j"))
    assert (s.duration, s.unit) == (1.0, "X")
    assert jsonl.parse('{"note": "no bytes"}', Path("j")) is None
    for bad in ("[1]", "nope", '{"bytes": 5}'):
        with pytest.raises((ValueError, TypeError)):
            jsonl.parse(bad, Path("j"))


def test_aggregate_per_drive_busy_time_and_min_volume():
    now = 10_000.0
    ss = [TapeSession(end=now - 100, duration=1000, bytes=18_000_000_000, unit="A"),
          TapeSession(end=now - 2000, duration=1000, bytes=18_000_000_000, unit="A"),
          TapeSession(end=now - 50, duration=500, bytes=9_000_000_000, unit="B"),
          # two concurrent dCache flushes of one pool: busy 150 s, not 200 s
          TapeSession(end=now - 10, duration=100, bytes=1_000_000_000, unit="P"),
          TapeSession(end=now - 60, duration=100, bytes=1_000_000_000, unit="P"),
          TapeSession(end=now - 5, duration=1, bytes=10, unit="C"),         # short
          TapeSession(end=now - 9000, duration=10, bytes=10**12, unit="D")]  # outside
    tw = aggregate(ss, now=now, window=3600, min_volume=1000)
    assert tw.per_unit == pytest.approx({"A": 18e6, "B": 18e6, "P": 2e9 / 150})
    assert (tw.units, tw.sessions, tw.filtered) == (3, 5, 1)
    assert tw.rate == pytest.approx(36e6 + 2e9 / 150)


def test_logtail_resume_and_rotation(tmp_path):
    log = tmp_path / "cta.log"
    cookie = tmp_path / "cookie.json"
    parse = cta.parser()
    t0 = time.time() - 3000
    lines = [cta_text(t0 + 100 * i, f"D{i % 2}", "V", 10**9, 10.0) for i in range(6)]
    log.write_text("\n".join(lines[:2]) + "\n")
    got, garbage = read_sessions([(log, parse)], cookie, keep_after=0)
    assert len(got) == 2 and garbage == 0
    # nothing new: the same two, remembered in the cookie, not re-read
    got, _ = read_sessions([(log, parse)], cookie, keep_after=0)
    assert len(got) == 2
    # two more lines, then rotation, then two lines in the new file
    with open(log, "a") as fh:
        fh.write(lines[2] + "\n" + lines[3] + "\ngarbage line\n")
    os.rename(log, tmp_path / "cta.log.1")
    log.write_text(lines[4] + "\n" + lines[5] + "\n")
    got, garbage = read_sessions([(log, parse)], cookie, keep_after=0)
    assert sorted(s.end for s in got) == pytest.approx([t0 + 100 * i for i in range(6)])
    assert garbage == 1          # 'garbage line' is not a cta-taped line: counted
    # a damaged cookie starts again from the beginning of the current file
    cookie.write_text("{not json")
    got, _ = read_sessions([(log, parse)], cookie, keep_after=0)
    assert len(got) == 2


def test_fixture_files_parse():
    parse = cta.parser()
    for name in ("cta-taped-4x18.log", "cta-taped-4x18.json"):
        sessions, garbage = read_sessions([(FIX / name, parse)], None, keep_after=0)
        writes = [s for s in sessions if s.write]
        assert len(writes) == 17 and garbage == 0         # 16 + one short session
        assert [s.kind for s in sessions if not s.write] == ["Retrieve"]
        assert {s.unit for s in sessions} == {"IBM-LTO9-01", "IBM-LTO9-02", "IBM-LTO9-03",
                                              "IBM-LTO9-04", "IBM-LTO9-05"}
