"""check_gridxfer_tape on the corpus of real-format logs (tests/fixtures/tape/).

The expected figures come from the scenario tables (what really happened: sessions,
kills, drives put down, dCache flushes with their queue and transfer times), computed
here without the parser. Every file is read through the real entry point: in one go,
incrementally with lines appended (and half-written) between runs, and across a
logrotate into old/ as CTA's packaged logrotate file does it.
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

FIX = Path(__file__).resolve().parents[3] / "fixtures"
sys.path.insert(0, str(FIX / "tape"))
sys.path.insert(0, str(FIX / "monitoring"))
import corpus  # noqa: E402
from monfixtures import run_check  # noqa: E402

GB = 1_000_000_000
SCENARIOS = {sc.name: sc for sc in corpus.scenarios()}
ACCEPT = 0.01                       # the acceptance: within 1 %


# --- the expectation, from the tables only ----------------------------------------------
def expect_cta(sc: corpus.Scenario, now: float, min_volume: int = GB) -> dict[str, float]:
    start = now - sc.window
    logged = [s for s in sc.sessions if s.end <= now]
    events = sorted([(s.end, "killed" if s.kill else (s.status or "none"), s.drive)
                     for s in logged]
                    + [(d.at, "killed", d.drive) for d in sc.downs if d.at <= now])
    state = {drive: what for t, what, drive in events if start <= t <= now}
    down = {d for d, what in state.items() if what == "killed"}
    failing = {d for d, what in state.items() if what not in ("killed", "success")}
    writes = [s for s in logged if s.write and s.figures and start <= s.end <= now]
    counted = [s for s in writes if s.data >= min_volume]
    per: dict[str, list[float]] = {}
    for s in counted:
        if s.drive not in down:
            acc = per.setdefault(s.drive, [0.0, 0.0])
            acc[0] += s.data
            acc[1] += s.total            # one session at a time per drive
    volume = sum(s.data * max(0.0, s.end - max(s.start, start)) / s.total for s in counted)
    return {"write_MBps": sum(b / t for b, t in per.values()) / 1e6,
            "volume_MBps": volume / sc.window / 1e6, "drives": len(per),
            "drives_down": len(down), "drives_failing": len(failing),
            "sessions": len(counted),
            "failed_sessions": sum(1 for s in writes if s.kill or s.status != "success")}


def union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for s, e in sorted(intervals):
        if s > end:
            total, end = total + e - s, e
        elif e > end:
            total, end = total + e - end, e
    return total


def expect_dcache(sc: corpus.Scenario, now: float) -> dict[str, float]:
    start = now - sc.window
    stores = [f for f in sc.flushes if f.kind == "store" and start <= f.end <= now]
    ok = [f for f in stores if f.rc == 0]
    pools: dict[str, list] = {}
    for f in ok:
        pools.setdefault(f.pool, []).append(f)
    rate = sum(sum(f.size for f in fs) / union([(f.end - f.transfer_ms / 1000, f.end)
                                                 for f in fs]) for fs in pools.values())
    volume = sum(f.size * (f.end - max(f.end - f.transfer_ms / 1000, start))
                 / (f.transfer_ms / 1000) for f in ok)
    return {"write_MBps": rate / 1e6, "volume_MBps": volume / sc.window / 1e6,
            "drives": len(pools), "drives_down": 0, "drives_failing": 0,
            "sessions": len(stores), "failed_sessions": len(stores) - len(ok)}


def expect(sc: corpus.Scenario, now: float) -> dict[str, float]:
    return expect_cta(sc, now) if sc.fmt.startswith("cta") else expect_dcache(sc, now)


# --- running the check --------------------------------------------------------------------
def perf(out: str) -> dict[str, float]:
    return {m[0].strip("'"): float(m[1])
            for m in re.findall(r"(\S+)=([-\d.]+)", out.split("|")[1])}


def check(sc: corpus.Scenario, source: Path, now: float, *extra: str,
          tz: str | None = None) -> tuple[str, dict[str, float]]:
    opt = "--cta" if sc.fmt.startswith("cta") else "--dcache"
    env = dict(os.environ, TZ=tz or sc.checker_tz)
    r = run_check("tape", opt, str(source), "-W", f"{int(sc.window)}s", "--at", repr(now),
                  *sc.args, *extra, env=env)
    assert r.returncode in (0, 1, 2), r.stdout + r.stderr
    return r.stdout, perf(r.stdout)


def assert_matches(sc: corpus.Scenario, got: dict[str, float], want: dict[str, float],
                   garbage: int, out: str) -> None:
    for key in ("write_MBps", "volume_MBps"):
        assert got[key] == pytest.approx(want[key], rel=ACCEPT, abs=0.01), (key, out)
    for key in ("drives", "drives_down", "drives_failing", "sessions", "failed_sessions"):
        assert got[key] == want[key], (key, out)
    assert got["unparsable_lines"] == garbage, out


def test_corpus_files_are_current(tmp_path):
    """The committed files are exactly what the tables give (regenerate with corpus.py)."""
    for sc in corpus.write(tmp_path):
        for rel in sc.files:
            assert (tmp_path / rel).read_bytes() == (FIX / "tape" / rel).read_bytes(), rel


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_corpus_whole_file(name, gridxfer_home):
    sc = SCENARIOS[name]
    want = expect(sc, sc.now)
    assert want["write_MBps"] > 0 and want["sessions"] >= 3        # the scenario has data
    out, got = check(sc, FIX / "tape" / sc.source, sc.now, "--no-state")
    assert_matches(sc, got, want, sc.garbage, out)
    assert f"{sc.garbage} unparsable line(s)" in out


def _append(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_corpus_incremental_with_half_written_lines(name, tmp_path, gridxfer_home):
    """Three checks; before each, the lines logged since are appended, the last one only
    half-written (it is completed before the next check): nothing lost, nothing counted
    twice, and a half-written line is never counted as unparsable."""
    sc = SCENARIOS[name]
    log = tmp_path / next(iter(sc.files))
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(sc.head)
    state = ["--state-file", str(tmp_path / "cookie.json")]
    i, pending = 0, ""
    for cut in (sc.now - sc.window * 0.6, sc.now - sc.window * 0.25, sc.now):
        chunk = [line for t, line in sc.timed[i:] if t <= cut]
        i += len(chunk)
        text = pending + "".join(line + "\n" for line in chunk)
        pending = ""
        if i < len(sc.timed):                       # the next line, half-written
            nxt = sc.timed[i][1] + "\n"
            text += nxt[: len(nxt) // 2]
            pending = nxt[len(nxt) // 2:]
            i += 1
        _append(log, text)
        out, got = check(sc, tmp_path / sc.source, cut, *state)
        garbage = sum(1 for line in chunk if line in sc.junk)
        assert_matches(sc, got, expect(sc, cut), garbage, out)


@pytest.mark.parametrize("name", ["cta-text-zurich.log", "cta-json.log"])
def test_cta_rotation_into_old_dir(name, tmp_path, gridxfer_home):
    """CTA's logrotate: the log moves to old/<name>-%Y%m%d-%s, a new one is created, and
    cta-taped keeps writing to the old file until SIGUSR1 reopens it."""
    sc = SCENARIOS[name]
    log = tmp_path / "cta" / name
    old = tmp_path / "cta" / "old"
    old.mkdir(parents=True)
    lines = [line + "\n" for _, line in sc.timed]
    times = [t for t, _ in sc.timed]
    n1 = sum(1 for t in times if t <= sc.now - 5400)
    n2 = sum(1 for t in times if t <= sc.now - 2700)
    state = ["--state-file", str(tmp_path / "cookie.json")]
    log.write_text("".join(lines[:n1]))
    check(sc, log, times[n1 - 1], *state)
    _append(log, "".join(lines[n1:n2 - 3]))              # written before the rotation
    rotated = old / f"{name}-20261121-{int(times[n2 - 3])}"
    os.rename(log, rotated)                               # logrotate: olddir + dateext
    log.write_text("")                                    # create 0644 cta tape
    _append(rotated, "".join(lines[n2 - 3:n2]))           # before SIGUSR1 reopens the log
    _append(log, "".join(lines[n2:]))
    out, got = check(sc, log, sc.now, *state)
    garbage = sum(1 for _, line in sc.timed[n1:] if line in sc.junk)
    assert_matches(sc, got, expect(sc, sc.now), garbage, out)
    assert "not found" not in out


def test_rotated_file_gone_is_reported(tmp_path, gridxfer_home):
    sc = SCENARIOS["cta-text-zurich.log"]
    log = tmp_path / sc.name
    lines = [line + "\n" for _, line in sc.timed]
    state = ["--state-file", str(tmp_path / "cookie.json")]
    log.write_text("".join(lines[:50]))
    check(sc, log, sc.timed[49][0], *state)
    _append(log, "".join(lines[50:60]))
    os.rename(log, tmp_path / f"{sc.name}-20261121-1.gz")   # compressed: not followed
    log.write_text("".join(lines[60:]))
    out, _ = check(sc, log, sc.now, *state)
    assert "was rotated and the previous file was not found" in out


def test_utc_checker_reading_zurich_log_is_unknown(gridxfer_home):
    """Without --log-tz, a UTC checker reads Zurich wall time as UTC: lines from the last
    hour land in the future. That is UNKNOWN with the reason, never a silent 0 MB/s."""
    sc = SCENARIOS["cta-text-zurich.log"]
    env = dict(os.environ, TZ="UTC")
    r = run_check("tape", "--cta", str(FIX / "tape" / sc.source), "-W", "2h",
                  "--at", repr(sc.now), "--no-state", env=env)
    assert r.returncode == 3, r.stdout
    assert "in the future" in r.stdout and "--log-tz" in r.stdout and "time zone" in r.stdout
    # the checker in the servers' zone needs no option
    out, got = check(sc, FIX / "tape" / sc.source, sc.now, "--no-state",
                     tz="Europe/Zurich")
    assert got["write_MBps"] == pytest.approx(expect(sc, sc.now)["write_MBps"], rel=ACCEPT)


def test_billing_directory_without_files_for_the_window_is_unknown(tmp_path, gridxfer_home):
    (tmp_path / "2025" / "01").mkdir(parents=True)
    (tmp_path / "2025" / "01" / "billing-2025.01.01").write_text("")
    sc = SCENARIOS["dcache-backlog"]
    r = run_check("tape", "--dcache", str(tmp_path), "--at", repr(sc.now), "--no-state")
    assert r.returncode == 3 and "no billing-yyyy.MM.dd file for the window" in r.stdout


def test_idle_window_still_names_drives_down(tmp_path, gridxfer_home):
    f = tmp_path / "tape.jsonl"
    f.write_text('{"end": 1000, "event": "down", "drive": "D9"}\n')
    r = run_check("tape", "--jsonl", str(f), "-W", "1h", "--at", "2000", "--idle", "warning",
                  "--no-state")
    assert r.returncode == 1, r.stdout
    assert "no tape sessions in the last 1h" in r.stdout and "down (killed or put down): D9" \
        in r.stdout
