"""A bench run as a program and killed with SIGTERM still runs its clean-up
(bench.exit_on_sigterm); importing the package (as pytest does) leaves SIGTERM alone."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_sigterm_runs_the_benchs_finally(tmp_path):
    marker = tmp_path / "cleaned"
    code = ("import bench, time, pathlib, sys\n"
            "bench.exit_on_sigterm()\n"
            "try:\n"
            "    print('ready', flush=True); time.sleep(60)\n"
            "finally:\n"
            f"    pathlib.Path({str(marker)!r}).write_text('yes')\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.monotonic() + 5
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.read_text() == "yes"


def test_importing_bench_leaves_sigterm_alone():
    out = subprocess.run([sys.executable, "-c", "import signal, bench, bench.smallfiles; "
                          "print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "True"
