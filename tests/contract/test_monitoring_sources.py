"""One contract, run against every MonitoringSource on real data: a campaign journal, the
CTA and dCache logs of the tape corpus (tests/fixtures/tape, real formats, with garbage
lines written on purpose), a JSON-lines file, and a real iperf3 run on loopback."""
from __future__ import annotations

import dataclasses
import math
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

FIX = Path(__file__).resolve().parents[1] / "fixtures"
sys.path.insert(0, str(FIX / "tape"))
sys.path.insert(0, str(FIX / "monitoring"))
import corpus  # noqa: E402
from monfixtures import make_journal, steady_attempts  # noqa: E402

from gridxfer.monitoring.series import MonitoringSource, Series, Window  # noqa: E402
from gridxfer.monitoring.sources import cta, dcache, jsonl  # noqa: E402
from gridxfer.monitoring.sources.iperf import IperfSource  # noqa: E402
from gridxfer.monitoring.sources.journal import JournalSource, throughput  # noqa: E402
from gridxfer.monitoring.sources.logtime import LogClock  # noqa: E402
from gridxfer.monitoring.sources.tapelog import aggregate  # noqa: E402

SCENARIOS = {sc.name: sc for sc in corpus.scenarios()}
T0 = 1_795_260_000.0


@dataclasses.dataclass(frozen=True)
class Case:
    source: MonitoringSource[Any]
    window: Window
    unparsable: dict[str, int]
    live: bool = False              # measures now (iperf3): cannot read an empty past


def _journal(tmp: Path) -> Case:
    path = make_journal(tmp / "c.sqlite",
                        steady_attempts(T0, T0 + 600, 50e6, "root://se1//d")
                        + steady_attempts(T0 + 100, T0 + 400, 20e6, "root://se2//d")
                        + [(T0 + 550, None, 10**9, "root://se2//d"),
                           (T0 + 10, T0 + 20, 10**8, "root://se1//d", "failed")])
    return Case(JournalSource((path,)), Window(T0 + 600, 300), {})


def _cta(name: str) -> Case:
    sc = SCENARIOS[name]
    src = cta.source([FIX / "tape" / sc.source], clock=LogClock(sc.zone, sc.now))
    return Case(src, Window(sc.now, sc.window), {"cta": sc.garbage} if sc.garbage else {})


def _dcache(name: str) -> Case:
    sc = SCENARIOS[name]
    src = dcache.source([FIX / "tape" / sc.source], now=sc.now, window=sc.window, zone=sc.zone)
    return Case(src, Window(sc.now, sc.window), {"dcache": sc.garbage} if sc.garbage else {})


def _jsonl() -> Case:
    return Case(jsonl.source([FIX / "tape" / "sessions.jsonl"]), Window(1795264000.0, 3600),
                {"jsonl": 1})


def listening(port: int) -> bool:
    with open("/proc/net/tcp") as fh:
        rows = [line.split() for line in fh.readlines()[1:]]
    return any(r[1].endswith(f":{port:04X}") and r[3] == "0A" for r in rows)


@pytest.fixture
def iperf3_server() -> Iterator[int]:
    """A real ``iperf3 -s`` on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(["iperf3", "-s", "-B", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not listening(port):
            assert time.monotonic() < deadline and proc.poll() is None, "iperf3 -s not listening"
            time.sleep(0.05)
        yield port
    finally:
        proc.kill()
        proc.wait()


CASES = ["journal", *(f"cta:{n}" for n in sorted(SCENARIOS) if n.startswith("cta")),
         *(f"dcache:{n}" for n in sorted(SCENARIOS) if n.startswith("dcache")), "jsonl",
         pytest.param("iperf", marks=pytest.mark.integration)]


@pytest.fixture(params=CASES)
def case(request, tmp_path) -> Case:
    kind, _, name = request.param.partition(":")
    if kind == "journal":
        return _journal(tmp_path)
    if kind == "cta":
        return _cta(name)
    if kind == "dcache":
        return _dcache(name)
    if kind == "jsonl":
        return _jsonl()
    port = request.getfixturevalue("iperf3_server")
    return Case(IperfSource("127.0.0.1", port=port, timeout=30), Window(time.time(), 2), {},
                live=True)


def test_a_series_is_frozen_plain_data(case):
    series = case.source.series(case.window)
    assert isinstance(series, Series) and isinstance(series.samples, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        series.samples = ()                                    # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        series.samples[0].value = 0                            # type: ignore[misc]
    assert case.source.kind in ("journal", "cta", "dcache", "jsonl", "iperf")


def test_samples_have_a_time_a_value_and_labels_in_time_order(case):
    series = case.source.series(case.window)
    assert series.samples, "the real data has samples"
    times = [s.time for s in series.samples]
    assert times == sorted(times)
    for s in series.samples:
        assert math.isfinite(s.time) and math.isfinite(s.start) and s.start <= s.time
        assert math.isfinite(s.value) and s.value >= 0
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in s.labels.items())
        assert s.labels["unit"]
    inside = series.inside()
    assert inside and sum(s.value for s in inside) > 0
    assert all(s.time >= series.window.start or s.start < series.window.end for s in inside)


def test_the_reading_reports_what_it_could_not_parse(case):
    series = case.source.series(case.window)
    assert dict(series.unparsable) == case.unparsable
    assert series.unparsable_total == sum(case.unparsable.values())
    assert all(isinstance(n, str) for n in series.notes)
    assert series.inputs >= 1


def test_the_window_is_the_one_asked_for_and_idle_when_empty(case):
    series = case.source.series(case.window)
    if case.live:       # iperf3 measures now: the window is the run's own (sources/iperf.py)
        assert series.window.seconds == pytest.approx(case.window.seconds, abs=0.5)
        assert series.window.end == pytest.approx(time.time(), abs=30)
        assert series.totals["received_bps"] > 0 and not series.idle
        return
    assert series.window == case.window and not series.idle
    before = Window(case.window.start - 400 * 86400, 60)
    assert case.source.series(before).idle


def test_reading_twice_without_state_gives_the_same_series(case):
    if case.live:
        pytest.skip("a live measurement differs each time")
    assert case.source.series(case.window) == case.source.series(case.window)


def test_the_checks_aggregates_read_every_series(tmp_path):
    """The journal's and the tape logs' aggregates take a series (what the checks judge)."""
    j = _journal(tmp_path)
    wt = throughput(j.source.series(j.window))
    assert wt.rate > 0 and wt.active == 1
    t = _jsonl()
    tw = aggregate(t.source.series(t.window).samples, now=t.window.end,
                   window=t.window.seconds)
    assert tw.down == ("D2",) and tw.reads == 1 and tw.failed == 1 and tw.units == 2
