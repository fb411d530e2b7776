"""Nagios in real operation: a real nagios4 daemon (running its checks as the nagios user)
reads a journal that another account's campaign wrote, through the shipped commands.cfg
($USER3$ = that account's GRIDXFER_HOME, set up as the README says); and the passive
throughput service ends OK when the campaign ends."""
from __future__ import annotations

import grp
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "monitoring"))
from monfixtures import NAGIOS4, VENV_BIN, nagios_service, write_nagios_config  # noqa: E402

from gridxfer.monitoring.alerts import DropAlerter  # noqa: E402
from gridxfer.testbed.procs import stop_popen  # noqa: E402

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not os.path.exists(NAGIOS4), reason="nagios4 not installed"),
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as two users")]

SRC = Path(__file__).resolve().parents[2] / "src"
WRITER = """
import sys, time

sys.path.insert(0, {fixtures!r})
from pathlib import Path
from monfixtures import make_journal, steady_attempts
from gridxfer.campaign.journal.lock import CampaignLock
now = time.time()
with CampaignLock("camp"):
    make_journal(Path({journal!r}), steady_attempts(now - 900, now, 150e6, "root://se1"),
                 name="camp")
"""


@pytest.fixture
def root():
    path = Path(tempfile.mkdtemp(prefix="gx-nagop-", dir="/tmp"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _as(user: str, *argv: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["setpriv", "--reuid", user, "--regid", user, "--init-groups",
                           "env", *[f"{k}={v}" for k, v in env.items()], *argv],
                          capture_output=True, text=True, timeout=120)


def _status(path: Path) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    if path.exists():
        for block in re.findall(r"servicestatus \{(.*?)\}", path.read_text(), re.S):
            fields = dict(ln.strip().split("=", 1) for ln in block.strip().splitlines()
                          if "=" in ln)
            out[fields.get("service_description", "")] = fields
    return out


def test_nagios_reads_another_accounts_journal_and_the_campaign_ends_ok(root):
    from gridxfer.testbed.xrootd import ensure_user
    owner = ensure_user()               # the unprivileged account that runs campaigns
    home = root / "gxhome"
    for d, user, group, mode in ((home, owner, "nagios", 0o2750),
                                 (home / "campaigns", owner, "nagios", 0o2750),
                                 (home / "checks", "nagios", "nagios", 0o750)):
        d.mkdir()
        shutil.chown(d, user, group)
        os.chmod(d, mode)
    journal = home / "campaigns" / "camp.sqlite"
    fixtures = str(Path(__file__).resolve().parents[1] / "fixtures" / "monitoring")
    w = _as(owner, sys.executable, "-c", WRITER.format(fixtures=fixtures, journal=str(journal)),
            env={"PYTHONPATH": str(SRC), "GRIDXFER_HOME": str(home)})
    assert w.returncode == 0, w.stderr
    for f in (journal, journal.with_suffix(".lock")):
        st = f.stat()
        assert (stat.S_IMODE(st.st_mode), st.st_gid) == (0o640, grp.getgrnam("nagios").gr_gid), f

    services = nagios_service(
        "campaign_throughput", "gridxfer-throughput",
        "check_gridxfer_throughput!10m!100:!50:!-C camp --baseline none")
    services = services.replace("use gridxfer-throughput", "use gridxfer-throughput\n"
                                "    check_interval 2\n    retry_interval 1")
    services += nagios_service("gridxfer_throughput", "gridxfer-passive-throughput",
                               "gridxfer_passive_stale").replace("    check_command", "#")
    cfg = write_nagios_config(root / "etc", VENV_BIN, services, include_example=False,
                              interval_length=1, gridxfer_home=home)
    status = root / "etc" / "var" / "status.dat"
    cmd_file = root / "etc" / "rw" / "nagios.cmd"
    env = dict(os.environ, PYTHONPATH=f"{SRC}:{os.environ.get('PYTHONPATH', '')}")
    proc = subprocess.Popen([NAGIOS4, str(cfg)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)

    def wait_for(pred, what):
        end = time.time() + 60
        while time.time() < end:
            st = _status(status)
            if pred(st):
                return st
            time.sleep(0.5)
        raise AssertionError(f"{what}: {_status(status)}\n"
                             f"{(root / 'etc/var/nagios.log').read_text()[-3000:]}")

    try:
        st = wait_for(lambda s: s.get("campaign_throughput", {}).get("has_been_checked") == "1",
                      "active throughput check")
        svc = st["campaign_throughput"]
        assert svc["current_state"] == "0", svc["plugin_output"]
        assert svc["plugin_output"].startswith("THROUGHPUT OK - 1"), svc["plugin_output"]

        wait_for(lambda s: cmd_file.exists(), "command file")
        alerter = DropAlerter(campaign="camp", floor_bytes_per_s=100e6, baseline_fraction=None,
                              window=2, cmd_file=cmd_file, on_drop=None, host="gx-test-host")
        t = time.time()
        for k in range(4):
            alerter.observe(t + k, 20e6)
        wait_for(lambda s: s.get("gridxfer_throughput", {}).get("current_state") == "2",
                 "passive CRITICAL")
        alerter.finish(t + 5, "done, 10/10 files done, 0 failed", 20e6)
        st = wait_for(lambda s: s.get("gridxfer_throughput", {}).get("current_state") == "0",
                      "final OK")
        assert "campaign ended: done" in st["gridxfer_throughput"]["plugin_output"]
    finally:
        stop_popen(proc)


@pytest.mark.parametrize("unshared", ["directory", "file"])
def test_an_unshared_journal_says_how_to_share_it(root, unshared):
    """Without the set-group-ID directory the check stays UNKNOWN, but says why and what to
    do (it said "Permission denied", or "no journal" for a directory it could not read)."""
    from gridxfer.testbed.xrootd import ensure_user
    owner = ensure_user()
    home = root / "gxhome"
    home.mkdir()
    shutil.chown(home, owner, owner)
    fixtures = str(Path(__file__).resolve().parents[1] / "fixtures" / "monitoring")
    journal = home / "campaigns" / "camp.sqlite"
    env = {"PYTHONPATH": str(SRC), "GRIDXFER_HOME": str(home)}
    w = _as(owner, sys.executable, "-c", "from gridxfer.state import subdir; subdir('campaigns')"
            + WRITER.format(fixtures=fixtures, journal=str(journal)), env=env)
    assert w.returncode == 0, w.stderr
    if unshared == "file":
        os.chmod(journal.parent, 0o755)
    check = Path(__file__).resolve().parents[2] / "checks" / "check_gridxfer_throughput"
    for args in (["-C", "camp"], []):
        r = _as("nagios", sys.executable, str(check), *args, "-w", "1:", "--baseline", "none",
                env=env)
        assert r.returncode == 3 and r.stdout.startswith("THROUGHPUT UNKNOWN - "), r
        assert "permission denied for uid" in r.stdout and "set-group-ID" in r.stdout, r.stdout
