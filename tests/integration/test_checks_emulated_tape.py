"""The EMULATED tape (gridxfer.testbed.tape) drains a real buffer directory and writes
CTA-format logs; check_gridxfer_tape and check_gridxfer_buffer change state for real."""
from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "monitoring"))
from monfixtures import run_check  # noqa: E402

from gridxfer.monitoring.sources import cta  # noqa: E402
from gridxfer.testbed.tape import EmulatedTape, TapeConfig  # noqa: E402

MB = 1_000_000


def perf(out: str) -> dict[str, float]:
    return {m[0].strip("'"): float(m[1]) for m in re.findall(r"(\S+)=([-\d.]+)", out.split("|")[1])}


def vids(log: Path) -> set[str]:
    """The cartridges of the sessions logged so far (a line being written is skipped)."""
    text = log.read_text() if log.exists() else ""
    return {s.vid for s in map(lambda line: cta.parser()(line, log), text.splitlines()) if s}


def poll_check(args, done, timeout: float = 60.0):
    """check_gridxfer_tape until ``done(result)`` (the drives are threads: no fixed sleep),
    or the timeout; returns the last result."""
    deadline = time.monotonic() + timeout
    while True:
        r = run_check("tape", *args)
        if done(r) or time.monotonic() > deadline:
            return r
        time.sleep(0.2)


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_emulated_tape_drives_the_checks(tmp_path, gridxfer_home, fmt):
    buf, log = tmp_path / "buffer", tmp_path / "cta-taped.log"
    buf.mkdir()
    for i in range(120):                           # sparse 1 MB files: no disk needed
        with open(buf / f"f{i:03d}.dat", "wb") as fh:
            fh.truncate(MB)
    (buf / ".partial.part").write_bytes(b"x")      # in-flight transfer: left alone
    cfg = TapeConfig(buffer=buf, log=log, drives=4, rate=2 * MB, mount_time=0.2,
                     position_time=0.02, unmount_time=0.1, max_session=1.5, log_format=fmt,
                     cartridge=8 * MB)
    tape_args = ("--cta", str(log), "-W", "5s", "--min-volume", "0", "-w", "7:", "-c", "4:")
    with EmulatedTape(cfg) as tape:
        # every drive has logged a session within the 5 s window (about 4.5 s here)
        r = poll_check(tape_args, lambda r: r.returncode == 0 and "|" in r.stdout
                       and perf(r.stdout).get("drives") == 4)
        assert r.returncode == 0, r.stdout
        p = perf(r.stdout)
        assert p["drives"] == 4 and p["per_drive_MBps"] == pytest.approx(2.0, rel=0.15)
        assert r.stdout.startswith("TAPE OK - [EMULATED tape] ")
        # inflow 12 MB/s > ~8 MB/s to tape: the buffer fills, CRITICAL long before it is full
        rb = run_check("buffer", "-p", str(buf), "--capacity", "1GB", "--inflow", "12MB/s",
                       "--cta", str(log), "-W", "4s", "--min-volume", "0",
                       "--outflow-basis", "drives")
        pb = perf(rb.stdout)
        assert rb.returncode == 2 and pb["fill_pct"] < 20, rb.stdout
        assert "[EMULATED tape]" in rb.stdout
        used = pb["used_GB"] * 1e9
        assert pb["time_to_full_s"] == pytest.approx((1e9 - used) / (12e6 - pb["outflow_MBps"]
                                                                      * 1e6), rel=0.01)
        tape.fail_drive(3)
        r = poll_check(tape_args, lambda r: r.returncode == 1 and "EMU-LTO-03" in r.stdout)
        assert r.returncode == 1, r.stdout
        assert perf(r.stdout)["drives"] == 3 and "EMU-LTO-03" in r.stdout
        assert "drive(s) down (killed or put down): EMU-LTO-03" in r.stdout
        # cartridges fill up (8 MB each, 4 s of writing): wait for a fifth vid in the log
        deadline = time.monotonic() + 60
        while len(vids(log)) <= 4 and time.monotonic() < deadline:
            time.sleep(0.2)
    assert (buf / ".partial.part").exists()
    assert not list((buf / ".tape-staging").rglob("*.dat")), "claimed files were not returned"
    sessions = [cta.parser()(line, log) for line in log.read_text().splitlines()]
    assert all(s is not None for s in sessions)
    assert sum(s.bytes for s in sessions) == sum(st.bytes for st in tape.stats)
    assert 'emulated' in log.read_text()
    # cartridges fill up: 8 MB each, so the vids change
    assert len({s.vid for s in sessions}) > 4
