"""A tape-backed testbed xrootd end to end: files copied there reach tape (XRootD's
query prepare says so), the EMULATED drives' CTA log carries exactly those bytes as
writes, check_gridxfer_tape reads it, and a recall (Retrieve) is not counted as a write."""
from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "monitoring"))
from monfixtures import run_check  # noqa: E402

from gridxfer.monitoring.sources import cta  # noqa: E402
from gridxfer.movers import TransferParams, capabilities_of, get_mover, mover_for  # noqa: E402
from gridxfer.testbed.gridspec import ServerSpec  # noqa: E402
from gridxfer.testbed.tapexrd import TapeSpec  # noqa: E402

pytestmark = pytest.mark.integration
MB = 1_000_000
SPEC = TapeSpec(drives=2, rate=8 * MB, mount=0.2, position=0.02, min_age=0.5, max_session=2)


def sessions(log: Path) -> list:
    text = log.read_text() if log.exists() else ""
    return [s for s in (cta.parser()(line, log) for line in text.splitlines()) if s]


def until(fn, done, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def test_files_reach_tape_and_the_tape_check_reads_the_drives_log(make_grid, tmp_path):
    inv = make_grid([ServerSpec("t1-tape", "xrootd", "T1T", tape=SPEC)])
    ep = inv.endpoints["t1-tape"]
    log = Path(ep.tape_log)
    assert ep.tape_backed and ep.tape_drives == 2
    urls = []
    for i in range(6):
        src = tmp_path / f"f{i}.dat"
        src.write_bytes(os.urandom(2 * MB))
        url = f"{ep.url}run/f{i}.dat"
        get_mover(f"file://{src}", url).copy(f"file://{src}", url, params=TransferParams())
        urls.append(url)
    tape = capabilities_of(mover_for(ep.url)).tape
    assert tape is not None
    got = until(lambda: tape.archive_status(urls), lambda a: all(s.on_tape for s in a.values()))
    assert all(s.on_tape and s.online for s in got.values()), got
    writes = until(lambda: [s for s in sessions(log) if s.kind == "ArchiveForUser" and s.write],
                   lambda w: sum(s.bytes for s in w) >= 12 * MB)
    assert sum(s.bytes for s in writes) == 12 * MB and all(s.emulated for s in writes)
    r = run_check("tape", "--cta", str(log), "-W", "10m", "--min-volume", "0",
                  "-w", "0:", "-c", "0:")
    assert r.returncode == 0 and "[EMULATED tape]" in r.stdout, r.stdout
    volume = dict(re.findall(r"(\S+)=([-\d.]+)", r.stdout.split("|")[1]))
    # a recall of every file is a Retrieve session: the check's write figures stay
    capabilities_of(mover_for(ep.url)).release(urls)
    until(lambda: tape.archive_status(urls), lambda a: not any(s.online for s in a.values()))
    rid = tape.bring_online(urls, 3600, 60)
    got = until(lambda: tape.stage_status(urls, rid), lambda a: all(s.online for s in a.values()))
    assert all(s.online for s in got.values()), got
    reads = until(lambda: [s for s in sessions(log) if s.kind == "Retrieve" and not s.write],
                  lambda rs: sum(s.bytes for s in rs) >= 12 * MB)
    assert sum(s.bytes for s in reads) == 12 * MB
    r2 = run_check("tape", "--cta", str(log), "-W", "10m", "--min-volume", "0",
                   "-w", "0:", "-c", "0:")
    after = dict(re.findall(r"(\S+)=([-\d.]+)", r2.stdout.split("|")[1]))
    assert r2.returncode == 0 and "read or label session(s) not counted" in r2.stdout
    assert {k: after[k] for k in ("sessions", "volume_MBps", "write_MBps")} == \
        {k: volume[k] for k in ("sessions", "volume_MBps", "write_MBps")}


def test_the_buffer_check_and_the_tape_check_read_the_same_bytes(make_grid):
    """With purge, a file leaves the disk buffer when it reaches tape: the buffer check's
    fill drops by exactly what the drives' log says went to tape."""
    held = TapeSpec(drives=2, rate=8 * MB, mount=0.2, position=0.02, min_age=3600,
                    max_session=2, purge=True)
    inv = make_grid([ServerSpec("t1-tape", "xrootd", "T1T", tape=held)])
    ep = inv.endpoints["t1-tape"]
    data, log = Path(ep.data_dir), Path(ep.tape_log)
    urls = []
    for i in range(6):
        f = data / "buf" / f"f{i}.dat"
        f.parent.mkdir(exist_ok=True)
        f.write_bytes(os.urandom(2 * MB))
        urls.append(ep.url + f"buf/f{i}.dat")
    buffer_args = ("-p", str(data), "--capacity", "1GB", "--inflow", "0", "--cta", str(log),
                   "-W", "100s", "--min-volume", "0")

    def perf(r):
        return {k: float(v) for k, v in re.findall(r"(\S+)=([-\d.]+)", r.stdout.split("|")[1])}

    before = perf(run_check("buffer", *buffer_args))
    assert before["used_GB"] * 1e9 == pytest.approx(12 * MB, rel=1e-3)
    for f in (data / "buf").iterdir():            # held by min_age until now
        os.utime(f, (time.time() - 7200, time.time() - 7200))
    tape = capabilities_of(mover_for(ep.url)).tape
    got = until(lambda: tape.archive_status(urls),
                lambda a: all(s.on_tape and not s.online for s in a.values()))
    assert all(s.on_tape and not s.online for s in got.values()), got       # purged
    writes = until(lambda: [s for s in sessions(log) if s.write],
                   lambda w: sum(s.bytes for s in w) >= 12 * MB)
    after = perf(run_check("buffer", *buffer_args))
    assert after["used_GB"] == 0
    assert sum(s.bytes for s in writes) == 12 * MB
    assert after["outflow_MBps"] * 100 * MB == pytest.approx(12 * MB, rel=0.01)
