"""check_gridxfer_link against a real iperf3 server on loopback; check_gridxfer_tuning
against a real network namespace (read-only verify through gridxfer.tuning.api)."""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "monitoring"))
from monfixtures import run_check  # noqa: E402

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    with open("/proc/net/tcp") as fh:
        rows = [line.split() for line in fh.readlines()[1:]]
    return any(r[1].endswith(f":{port:04X}") and r[3] == "0A" for r in rows)


@pytest.fixture
def iperf3_server():
    """A real ``iperf3 -s`` on loopback (restarted per test by -1: one test each)."""
    port = free_port()
    procs = []

    def start() -> int:
        proc = subprocess.Popen(["iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(proc)
        deadline = time.monotonic() + 30  # LISTEN, seen without connecting (-1: one client)
        while not listening(port) and time.monotonic() < deadline:
            assert proc.poll() is None, f"iperf3 -s exited {proc.returncode}"
            time.sleep(0.05)
        assert listening(port), "iperf3 -s did not listen within 30 s"
        return port

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_link_floor_ok_and_critical(iperf3_server):
    port = iperf3_server()
    # floors far below what loopback does under any load: the check's OK path, not a rate
    r = run_check("link", "-H", "127.0.0.1", "-p", str(port), "-d", "1", "-w", "1:",
                  "-c", "0.1:")
    assert r.returncode == 0, r.stdout
    mbps = float(re.search(r"link_Mbps=([\d.]+)", r.stdout).group(1))
    assert mbps > 1
    text = re.match(r"LINK OK - ([\d.]+) Mbit/s to 127\.0\.0\.1:(\d+) \(1 stream\(s\)", r.stdout)
    assert text and int(text.group(2)) == port, r.stdout
    assert abs(float(text.group(1)) - mbps) <= 0.051     # text has 1 decimal, perfdata 2
    port = iperf3_server()
    r = run_check("link", "-H", "127.0.0.1", "-p", str(port), "-d", "1", "-P", "2", "-R",
                  "-c", f"{int(mbps * 1000)}:")                  # an impossible floor
    assert r.returncode == 2 and r.stdout.startswith("LINK CRITICAL - ")
    assert "from 127.0.0.1" in r.stdout and "2 stream(s)" in r.stdout


def test_link_without_server_is_critical():
    """Monitoring Plugins guidelines, "Plugin Return Codes": a refused connection is the
    link failing, not the plugin: CRITICAL, not UNKNOWN."""
    r = run_check("link", "-H", "127.0.0.1", "-p", str(free_port()), "-d", "1")
    assert r.returncode == 2 and "Connection refused" in r.stdout


@pytest.mark.parametrize("host", ["u:hunter2@127.0.0.1", "", "a b", "h/x"])
def test_link_refuses_a_host_that_is_no_name_and_never_shows_a_password(host):
    r = run_check("link", "-H", host, "-d", "1")
    assert r.returncode == 3 and r.stderr == ""
    assert r.stdout.startswith("LINK UNKNOWN - -H ") and "hunter2" not in r.stdout
    assert len(r.stdout.splitlines()) == 1


@pytest.mark.root
def test_tuning_drift_in_a_netns(gridxfer_home):
    if os.geteuid() != 0:
        pytest.skip("needs root for ip netns")
    ns = f"gxmon-{uuid.uuid4().hex[:6]}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        want = {"net.ipv4.tcp_rmem": "4096 87380 33554432",
                "net.ipv4.tcp_wmem": "4096 65536 33554432",
                "net.ipv4.tcp_congestion_control": "bbr", "net.ipv4.tcp_mtu_probing": "1",
                "net.ipv4.tcp_no_metrics_save": "1"}
        for key, value in want.items():
            subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", f"{key}={value}"],
                           check=True)
        r = run_check("tuning", "-P", "dtn-10g", "-H", f"netns:{ns}")
        assert r.returncode == 0, r.stdout
        assert r.stdout.startswith(f"TUNING OK - profile dtn-10g on netns:{ns}: 5 setting(s)")
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w",
                        "net.ipv4.tcp_mtu_probing=0"], check=True)
        r = run_check("tuning", "-P", "dtn-10g", "-H", f"netns:{ns}")
        assert r.returncode == 1, r.stdout
        assert "net.ipv4.tcp_mtu_probing=0 (want 1)" in r.stdout
        assert "drifted=1;0;;0;5" in r.stdout
        r = run_check("tuning", "-P", "dtn-10g", "-H", f"netns:{ns}", "-c", "0", "-vv")
        assert r.returncode == 2
        assert "drift: net.ipv4.tcp_mtu_probing expected '1' actual '0'" in r.stdout
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
