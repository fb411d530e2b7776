"""Tape sources, one defect of the previous parsers per test (lines in the real formats)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

FIX = Path(__file__).resolve().parents[3] / "fixtures"
sys.path.insert(0, str(FIX / "tape"))
from formats import (Flush, Sess, billing_json, billing_text, cta_json, cta_text,  # noqa: E402
                     finished_records)

from gridxfer.monitoring.sources import cta, dcache, jsonl  # noqa: E402
from gridxfer.monitoring.sources.logtail import tail  # noqa: E402
from gridxfer.monitoring.sources.logtime import LogClock  # noqa: E402
from gridxfer.monitoring.sources.tapelog import aggregate  # noqa: E402

Z = "Europe/Zurich"
T0 = 1_795_260_000.0            # 2026-11-21 10:40 Zurich
GB = 1_000_000_000


def sess(drive: str, start: float, data: int = 100 * GB, **kw) -> Sess:
    return Sess("tpsrv01", drive, "L90001", kw.pop("mount", "ArchiveForUser"), start, 60.0,
                20.0, data / 300e6, 40.0, data, 10, **kw)


def lines(s: Sess, *, fmt: str = "text") -> list[str]:
    out = []
    for t, params in finished_records(s):
        if fmt == "text":
            out.append(cta_text(t, s.server, "Tape session finished", params, zone=Z,
                                drive=s.drive, event="tape_session_finished"))
        else:
            out.append(cta_json(t, s.server, "Tape session finished", params, zone=Z,
                                drive=s.drive, typed=fmt == "json"))
    return out


def parse_all(text_lines: list[str], now: float) -> list:
    p = cta.parser(clock=LogClock(Z, now))
    return [r for r in (p(line, Path("x")) for line in text_lines) if r is not None]


@pytest.mark.parametrize("fmt", ["text", "json", "json-strings"])
def test_killed_session_counts_once_and_puts_the_drive_down(fmt):
    ok = sess("D1", T0)
    killed = sess("D1", ok.end + 100, kill=9)
    assert len(lines(killed, fmt=fmt)) == 2            # DriveHandler logs it twice
    recs = parse_all(lines(ok, fmt=fmt) + lines(killed, fmt=fmt), killed.end + 10)
    tw = aggregate(recs, now=killed.end + 10, window=7200)
    assert tw.sessions == 2 and tw.failed == 1         # the echo is not a second session
    assert tw.down == ("D1",) and tw.units == 0
    # a later successful session brings it back: counted once, not +1 session
    again = sess("D1", killed.end + 200)
    recs = parse_all(lines(ok, fmt=fmt) + lines(killed, fmt=fmt) + lines(again, fmt=fmt),
                     again.end + 10)
    tw = aggregate(recs, now=again.end + 10, window=7200)
    assert tw.down == () and tw.sessions == 3
    assert tw.per_unit_bytes["D1"] == 300 * GB


def test_killed_without_figures_is_down_not_dropped():
    s = sess("D2", T0, kill=9, figures=False, status=None)
    recs = parse_all(lines(s), s.end + 10)
    assert len(recs) == 2 and all(r.killed for r in recs)
    assert aggregate(recs, now=s.end + 10, window=3600).down == ("D2",)


def test_failure_alone_is_failing_not_down_and_missing_status_is_not_success():
    a, b = sess("D3", T0, status="failure"), sess("D4", T0, status=None)
    recs = parse_all(lines(a) + lines(b), b.end + 10)
    tw = aggregate(recs, now=b.end + 10, window=3600)
    assert tw.down == () and tw.failing == ("D3", "D4") and tw.units == 2 and tw.failed == 2


def test_drive_put_down_event():
    s = sess("D5", T0)
    down = cta_text(s.end + 5, "tpsrv01", "Drive failed", {"tapeDrive": "D5"}, zone=Z,
                    event="putting_tape_drive_down", level="ERROR")
    recs = parse_all(lines(s) + [down], s.end + 10)
    assert aggregate(recs, now=s.end + 10, window=3600).down == ("D5",)


def test_rate_bases_on_real_lines():
    s = sess("D6", T0)
    (t, params), = finished_records(s)
    line = cta_text(t, s.server, "Tape session finished", params, zone=Z)
    clock = LogClock(Z, s.end + 1)
    d = {b: cta.parser(b, clock=clock)(line, Path("x")).duration for b in cta.BASES}
    assert d["payload"] == pytest.approx(s.total) and d["session"] == pytest.approx(s.total)
    assert d["drive"] == pytest.approx(s.total * s.data / (s.data + s.header))
    assert d["transfer"] == pytest.approx(s.rw_s)


def test_text_time_is_read_in_the_log_zone():
    s = sess("D7", T0)
    line = lines(s)[0]                  # "Nov 21 ..." Zurich wall time
    assert cta.parser(clock=LogClock(Z, T0 + 9999))(line, Path("x")).end == pytest.approx(
        s.end, abs=1e-3)
    utc = cta.parser(clock=LogClock("UTC", T0 + 9999))(line, Path("x"))
    assert utc.end == pytest.approx(s.end + 3600, abs=1e-3)      # an hour off, detectable


def test_dcache_backlogged_flush_ends_after_its_queue():
    f = Flush("pool_a", "store", T0, 3 * 3600 * 1000, 24_000, 2 * GB)
    for line in (billing_text(f, Z), billing_json(f, Z)):
        r = dcache.parser(LogClock(Z, T0 + 4 * 3600))(line, Path("billing-2026.11.21"))
        assert r.end == pytest.approx(f.end) and r.duration == pytest.approx(24.0)
        assert (r.unit, r.bytes, r.write) == ("pool_a", 2 * GB, True)


def test_dcache_restore_is_a_read_and_december_lands_in_the_old_year():
    f = Flush("pool_b", "restore", T0, 1000, 2000, GB)
    assert not dcache.parser(LogClock(Z, T0))(billing_text(f, Z), Path("b")).write
    dec31 = LogClock(Z).wall(2026, 12, 31, 23, 50, 0)
    g = Flush("pool_c", "store", dec31, 1_200_000, 30_000, GB)
    jan = LogClock(Z, dec31 + 86400)
    r = dcache.parser(jan)(billing_text(g, Z), Path("2027/01/billing-2027.01.01"))
    assert r.end == pytest.approx(g.end)


def test_jsonl_kind_keeps_reads_out():
    w = jsonl.parse('{"end": 100, "bytes": 2000000, "duration": 1, "kind": "archive"}', Path())
    r = jsonl.parse('{"end": 100, "bytes": 2000000, "duration": 1, "kind": "retrieve"}', Path())
    assert w.write and not r.write
    tw = aggregate([w, r], now=200, window=3600)
    assert tw.sessions == 1 and tw.reads == 1


def test_tail_leaves_a_half_written_line_for_next_time(tmp_path):
    log = tmp_path / "cta-taped.log"
    log.write_bytes(b"one\ntw")
    got = tail(log, None)
    assert got.lines == [b"one"]
    with open(log, "ab") as fh:
        fh.write(b"o\nthree\n")
    again = tail(log, got.position)
    assert again.lines == [b"two", b"three"]
