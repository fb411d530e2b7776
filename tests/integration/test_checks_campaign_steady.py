"""Acceptance (slow): a steady 10-minute campaign on the local grid raises no false alarm,
neither from check_gridxfer_throughput (floor + learnt baseline) polled through the run nor
from the campaign's own --alert-cmd-file alerter. Run with ``make test-slow``."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "monitoring"))
from monfixtures import run_check  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1500)]
DURATION = float(os.environ.get("GX_STEADY_SECONDS", "600"))
RATE = 2e6          # the destination's XRootD throttle: a steady 2 MB/s
WINDOW = 60.0


def test_steady_run_raises_no_false_alarm(make_grid, tmp_path, gridxfer_home):
    from gridxfer.testbed.localgrid import ServerSpec, put_local
    inv = make_grid([ServerSpec("src", "xrootd", "T0"),
                     ServerSpec("dst", "xrootd", "T1", throttle=RATE)])
    nfiles = int(RATE * (DURATION + 120) / 4_000_000) + 1
    zeros = b"\0" * 4_000_000
    for i in range(nfiles):
        put_local(inv, "src", f"steady/f{i:04d}.dat", zeros)
    spec = tmp_path / "steady.yaml"
    spec.write_text(f"""\
campaign: steady
source: {{url: "{inv.endpoints['src'].url}steady/", files: {{glob: "*.dat"}}}}
destinations:
  - tier: T1
    pool: ["{inv.endpoints['dst'].url}steady/"]
    max_active: 2
retries: {{max: 5, backoff: 1s}}
timeout: 300s
""")
    cmd_file = tmp_path / "nagios.cmd"
    env = dict(os.environ, GRIDXFER_HOME=str(gridxfer_home))
    camp = subprocess.Popen([sys.executable, "-m", "gridxfer", "campaign", "run", "--quiet",
                             "--alert-cmd-file", str(cmd_file), "--alert-floor", "1MB/s",
                             "--alert-baseline", "0.5", "--alert-window", f"{WINDOW:g}s",
                             str(spec)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    results: list[tuple[float, int, str]] = []
    try:
        time.sleep(WINDOW + 5)          # the first window includes the ramp-up
        t0 = time.time()
        while time.time() - t0 < DURATION:
            assert camp.poll() is None, "campaign ended early"
            r = run_check("throughput", "-C", "steady", "-W", f"{WINDOW:g}s", "-w", "1.5:",
                          "-c", "1:", "--baseline-warning", "70:", "--baseline-critical", "50:",
                          "--baseline-min-samples", "3", env=env)
            results.append((time.time() - t0, r.returncode, r.stdout.strip()))
            time.sleep(15)
    finally:
        if camp.poll() is None:
            camp.send_signal(signal.SIGINT)
            try:
                camp.wait(timeout=60)
            except subprocess.TimeoutExpired:
                camp.kill()
                camp.wait()
    bad = [r for r in results if r[1] != 0]
    assert not bad, bad
    rates = [float(r[2].split(" - ")[1].split(" MB/s")[0]) for r in results]
    print(f"\n{len(results)} checks over {DURATION:.0f}s, rate {min(rates):.2f}.."
          f"{max(rates):.2f} MB/s")
    assert len(results) >= DURATION / 20
    # the alerter's passive results: an OK one may close the run (its end), no other
    results_sent = cmd_file.read_text().splitlines() if cmd_file.exists() else []
    alerts = [line for line in results_sent if line.split(";")[3] != "0"]
    assert alerts == [], alerts
