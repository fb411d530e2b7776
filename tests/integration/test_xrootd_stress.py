"""Concurrent XRootD transfers must never hang (campaign bug: one transfer at 0 bytes
until the 600 s campaign timeout, "[ERROR] Operation expired").

Cause (movers/xrootd/cksum.py): xrootd 5.5 drops the answer to a second checksum query for a
file whose checksum job is still running when both queries come over the same
connection, and XrdCl puts all threads' queries to a server on one connection. Two
transfers of the same fresh source file at once (two tiers, verify=both) therefore left
one of them waiting for its full timeout.

Every waiting step here runs in daemon threads with a bound far below the old hang, so
a regression fails in seconds instead of blocking the session.
"""
from __future__ import annotations

import os
import queue
import signal
import threading
import time
import zlib
from pathlib import Path

import pytest

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers import TransferParams, get_mover
from gridxfer.movers.xrootd import watch as xrdwatch
from gridxfer.movers.registry import mover_for
from gridxfer.testbed import localgrid
from gridxfer.testbed.localgrid import ServerSpec
from gridxfer.testbed.procs import pidfile_procs

pytestmark = pytest.mark.integration

MB = 1 << 20


def _adler(data: bytes) -> str:
    return f"{zlib.adler32(data) & 0xFFFFFFFF:08x}"


def _files(inv, n: int, size: int, tag: str) -> list[tuple[str, str]]:
    """n fresh distinct files on 'src' (no stored checksum yet): [(url, adler32)]."""
    block = os.urandom(size)
    out = []
    for i in range(n):
        data = block[i * 4099:] + block[:i * 4099]
        out.append((localgrid.put_local(inv, "src", f"{tag}/f{i:03d}.dat", data), _adler(data)))
    return out


def _run_bounded(jobs: list, workers: int, bound: float) -> dict:
    """Run callables on daemon worker threads; {index: (result | exception, seconds)}.
    Fails the test if they are not all finished within ``bound`` seconds."""
    todo: queue.Queue = queue.Queue()
    for item in enumerate(jobs):
        todo.put(item)
    results: dict = {}

    def worker() -> None:
        while True:
            try:
                i, fn = todo.get_nowait()
            except queue.Empty:
                return
            start = time.monotonic()
            try:
                out = fn()
            except Exception as exc:  # noqa: BLE001 - reported by the test
                out = exc
            results[i] = (out, time.monotonic() - start)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(workers)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + bound
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    hung = len(jobs) - len(results)
    assert hung == 0, f"{hung} of {len(jobs)} operations still running after {bound:g} s (hang)"
    return results


@pytest.fixture
def fanout_grid(make_grid):
    return make_grid([ServerSpec("src", "xrootd", "T0"), ServerSpec("d1", "xrootd", "T1"),
                      ServerSpec("d2", "xrootd", "T1"), ServerSpec("d3", "xrootd", "T1")])


def test_concurrent_checksums_of_one_fresh_file(make_grid):
    inv = make_grid([ServerSpec("src", "xrootd", "T0")])
    files = _files(inv, 3, 16 * MB, "ck")
    mover = mover_for(files[0][0])
    for url, want in files:
        res = _run_bounded([lambda u=url: mover.checksum(u)] * 8, workers=8, bound=25)
        got = {v for v, _ in res.values()}
        assert got == {want}, got


def _fanout(inv, files, dests, params_for, bound: float) -> list[float]:
    """Copy every file to every destination at once (like several tiers); all verified."""
    jobs, targets = [], []
    for i, (url, want) in enumerate(files):
        for d in dests:
            dst = inv.endpoints[d].url + "out/" + "/".join(url.split("/")[-2:])   # tag/name
            params = params_for(i)
            jobs.append(lambda s=url, t=dst, p=params: get_mover(s, t).copy(s, t, params=p))
            targets.append((dst, want))
    res = _run_bounded(jobs, workers=8, bound=bound)
    errors = [f"{targets[i][0]}: {r}" for i, (r, _) in res.items() if isinstance(r, Exception)]
    assert not errors, errors
    for i, (out, _) in res.items():
        assert out.checksum == targets[i][1]
    return [secs for _, secs in res.values()]


def test_fanout_root_to_root_does_not_hang(fanout_grid):
    """12 fresh 16 MB files, each to 2 destinations at the same moment, 8 at a time,
    streams 2-4, adler32 verified at both ends, 30 s per-transfer timeout."""
    files = _files(fanout_grid, 12, 16 * MB, "fan")
    secs = _fanout(fanout_grid, files, ("d1", "d2"),
                   lambda i: TransferParams(streams=2 + i % 3, timeout=30, verify="both"), bound=45)
    # a hang is a TIMEOUT error at 30 s (asserted above: no errors) or the 45 s bound; how
    # fast the fan-out goes depends on the machine's load, not on the code under test
    assert len(secs) == 24


def test_stalled_copy_is_abandoned_quickly(make_grid, monkeypatch):
    """The source server freezes (SIGSTOP) mid-copy: the no-progress watchdog ends the
    transfer as a retryable TIMEOUT in seconds, not at the transfer timeout."""
    inv = make_grid([ServerSpec("src", "xrootd", "T0", throttle=20e6),
                     ServerSpec("d1", "xrootd", "T1")])
    (src, _), = _files(inv, 1, 96 * MB, "stall")
    dst = inv.endpoints["d1"].url + "out/stalled.dat"
    monkeypatch.setenv("GRIDXFER_XRD_STALL_TIMEOUT", "3")
    monkeypatch.setattr(xrdwatch, "ABANDON_GRACE", 2.0)
    server = pidfile_procs(Path(inv.endpoints["src"].data_dir).parent / "run")
    assert server
    moved = threading.Event()

    def progress(done: int, total: int | None) -> None:
        if done > 0:
            moved.set()

    def freeze() -> None:
        if moved.wait(30):
            for p in server:
                os.kill(p.pid, signal.SIGSTOP)

    threading.Thread(target=freeze, daemon=True).start()
    params = TransferParams(streams=1, timeout=120, verify="none")
    start = time.monotonic()
    try:
        res = _run_bounded([lambda: get_mover(src, dst).copy(src, dst, params=params,
                                                             progress=progress)],
                           workers=1, bound=40)
    finally:
        for p in server:
            os.kill(p.pid, signal.SIGCONT)
    err, secs = res[0]
    assert moved.is_set(), "the copy never started"
    assert isinstance(err, TransferError) and err.error_class is ErrorClass.TIMEOUT, err
    assert "no progress" in str(err)
    assert secs < 20 and time.monotonic() - start < 25


@pytest.mark.slow
def test_fanout_soak(fanout_grid, tmp_path):
    """40 x 32 MB to 3 destinations at once plus downloads, 3 rounds of fresh files."""
    for rnd in range(3):
        files = _files(fanout_grid, 40, 32 * MB, f"soak{rnd}")
        secs = _fanout(fanout_grid, files, ("d1", "d2", "d3"),
                       lambda i: TransferParams(streams=2 + i % 3, timeout=60, verify="both"),
                       bound=420)
        assert max(secs) < 60
        downloads = [lambda u=u, i=i, rnd=rnd: get_mover(u, "file://x").copy(
            u, f"file://{tmp_path}/r{rnd}-{i}.dat", params=TransferParams(streams=4, timeout=60))
            for i, (u, _) in enumerate(files[:16])]
        res = _run_bounded(downloads, workers=8, bound=120)
        assert not [r for r, _ in res.values() if isinstance(r, Exception)]
