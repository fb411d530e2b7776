"""checks/nagios/*.cfg: validated by the real ``nagios4 -v``, run through the command
definitions, and a real nagios4 daemon receiving DropAlerter passive results."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "monitoring"))
from monfixtures import (NAGIOS4, NAGIOS_DIR, VENV_BIN, expand_command, make_journal,  # noqa: E402
                         nagios_service, parse_commands, steady_attempts, write_nagios_config)

from gridxfer.monitoring.alerts import DropAlerter  # noqa: E402
from gridxfer.testbed.procs import stop_popen  # noqa: E402

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not os.path.exists(NAGIOS4), reason="nagios4 not installed"),
              pytest.mark.skipif(os.geteuid() != 0, reason="nagios4 -v drops to user nagios")]
FIX = Path(__file__).resolve().parents[1] / "fixtures" / "monitoring"
LINE = re.compile(r"^[A-Z]+ (OK|WARNING|CRITICAL|UNKNOWN)( -|:) [^\n|]+( \| [^\n]+)?\n$")


@pytest.fixture
def nagios_root():
    """A directory the nagios user can traverse (pytest's tmp_path is 0700 root)."""
    root = Path(tempfile.mkdtemp(prefix="gx-nagios-", dir="/tmp"))
    os.chmod(root, 0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def services_for(root: Path) -> tuple[str, dict[str, tuple[str, int]]]:
    """Services using every gridxfer command on local fixtures -> (cfg, expected rc)."""
    home = root / "gxhome"
    (home / "campaigns").mkdir(parents=True)
    now = time.time()
    make_journal(home / "campaigns" / "camp.sqlite",
                 steady_attempts(now - 900, now, 150e6, "root://se1"))
    buf = root / "buffer"
    buf.mkdir()
    (buf / "f").write_bytes(b"\0" * 1000)
    cta = root / "cta-taped.log"
    shutil.copy(FIX / "cta-taped-1-drive-killed.log", cta)
    expected = {
        "throughput_ok": ("check_gridxfer_throughput!10m!100:!50:!-C camp --baseline none", 0),
        "throughput_crit": ("check_gridxfer_throughput!10m!300:!200:!-C camp --baseline none", 2),
        "tape_warn": (f"check_gridxfer_tape!1h!60:!40:!--cta {cta} --at 1795270000 --no-state",
                      1),
        "buffer_crit": (f"check_gridxfer_buffer!{buf}!80!90!4h!1h!--capacity 10kB "
                        "--inflow 100 --outflow 10", 2),
        "tuning_unknown": ("check_gridxfer_tuning!no-such-profile!local!0!", 3),
        # no iperf3 server: the link is down, CRITICAL (guidelines: not UNKNOWN)
        "link_crit": ("check_gridxfer_link!127.0.0.1!1!1000:!100:!-d 1", 2),
    }
    cfg = "".join(nagios_service(name, f"gridxfer-{name.split('_')[0]}", cmd)
                  for name, (cmd, _) in expected.items())
    cfg += nagios_service("gridxfer_throughput", "gridxfer-passive-throughput",
                          "gridxfer_passive_stale").replace("    check_command", "#")
    return cfg, expected


def test_nagios4_validates_the_generated_configuration(nagios_root):
    services, _ = services_for(nagios_root)
    cfg = write_nagios_config(nagios_root / "etc", VENV_BIN, services)
    r = subprocess.run([NAGIOS4, "-v", str(cfg)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout
    assert "Total Warnings: 0" in r.stdout and "Total Errors:   0" in r.stdout
    assert re.search(r"Checked (\d+) services", r.stdout).group(1) == "13"   # 7 + 6 example
    # and a broken command reference is caught by the same validation
    (nagios_root / "etc" / "services.cfg").write_text(
        services + nagios_service("bad", "gridxfer-tape", "check_gridxfer_nosuch!1"))
    r = subprocess.run([NAGIOS4, "-v", str(cfg)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "check_gridxfer_nosuch" in r.stdout


def test_plugins_run_through_their_command_definitions(nagios_root):
    _, expected = services_for(nagios_root)
    commands = parse_commands((NAGIOS_DIR / "commands.cfg").read_text())
    env = dict(os.environ, GRIDXFER_HOME=str(nagios_root / "gxhome"))
    for name, (check_command, rc) in expected.items():
        argv = expand_command(check_command, commands, str(VENV_BIN),
                              str(nagios_root / "gxhome"))
        plugin = [a for a in argv if Path(a).name.startswith("check_gridxfer_")]
        assert plugin and plugin[0] in argv[:3], argv    # /usr/bin/env GRIDXFER_HOME=... first
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == rc, (name, argv, r.stdout)
        assert LINE.match(r.stdout), (name, r.stdout)
        assert "Traceback" not in r.stderr


def _status(path: Path) -> dict[str, dict[str, str]]:
    """servicestatus blocks of nagios' status.dat, by service_description."""
    out: dict[str, dict[str, str]] = {}
    if not path.exists():
        return out
    for block in re.findall(r"servicestatus \{(.*?)\}", path.read_text(), re.S):
        fields = dict(line.strip().split("=", 1) for line in block.strip().splitlines()
                      if "=" in line)
        out[fields.get("service_description", "")] = fields
    return out


def test_real_nagios_daemon_runs_checks_and_takes_passive_alerts(nagios_root):
    """nagios4 runs the tape check through commands.cfg, and DropAlerter's passive
    results arrive through the real external command FIFO."""
    shutil.copy(FIX / "cta-taped-4x18.log", nagios_root / "cta.log")
    os.chmod(nagios_root / "cta.log", 0o644)
    state = nagios_root / "etc" / "var" / "tape.cookie"
    services = nagios_service(
        "tape_write", "gridxfer-tape",
        f"check_gridxfer_tape!1h!60:!40:!--cta {nagios_root}/cta.log --at 1795270000 "
        f"--state-file {state}")
    services += nagios_service("gridxfer_throughput", "gridxfer-passive-throughput",
                               "gridxfer_passive_stale").replace("    check_command", "#")
    services = services.replace("use gridxfer-tape", "use gridxfer-tape\n    check_interval 2"
                                "\n    retry_interval 1")
    cfg = write_nagios_config(nagios_root / "etc", VENV_BIN, services, include_example=False,
                              interval_length=1)
    status = nagios_root / "etc" / "var" / "status.dat"
    cmd_file = nagios_root / "etc" / "rw" / "nagios.cmd"
    proc = subprocess.Popen([NAGIOS4, str(cfg)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not (cmd_file.exists() and status.exists()):
            time.sleep(0.2)
        assert cmd_file.exists(), (nagios_root / "etc/var/nagios.log").read_text()
        alerter = DropAlerter(campaign="demo", floor_bytes_per_s=100e6, baseline_fraction=None,
                              window=2, cmd_file=cmd_file, on_drop=None, host="gx-test-host")
        t = time.time()
        for k in range(4):
            alerter.observe(t + k, 20e6)
        assert [e.code for e in alerter.events] == [2] and alerter.events[0].delivered

        def wait_for(pred, what):
            end = time.time() + 45
            while time.time() < end:
                st = _status(status)
                if pred(st):
                    return st
                time.sleep(0.5)
            raise AssertionError(f"{what}: {_status(status)}\n"
                                 f"{(nagios_root / 'etc/var/nagios.log').read_text()[-3000:]}")

        st = wait_for(lambda s: s.get("gridxfer_throughput", {}).get("current_state") == "2",
                      "passive CRITICAL")
        assert "campaign demo: 20.0 MB/s, below floor 100.0 MB/s" in \
            st["gridxfer_throughput"]["plugin_output"]
        assert st["gridxfer_throughput"]["performance_data"].startswith("throughput_MBps=20.000")
        alerter.observe(t + 5, 150e6)
        wait_for(lambda s: s.get("gridxfer_throughput", {}).get("current_state") == "0",
                 "passive recovery")
        st = wait_for(lambda s: s.get("tape_write", {}).get("has_been_checked") == "1",
                      "active tape check")
        assert st["tape_write"]["current_state"] == "0"
        assert st["tape_write"]["plugin_output"].startswith("TAPE OK - 72.0 MB/s to tape")
    finally:
        stop_popen(proc, grace=20)
