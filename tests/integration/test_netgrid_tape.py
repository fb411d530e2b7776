"""The netns grid's tape-backed service (`xrootd-tape`): XRootD in a host's namespace
reports files on tape, and `down` also stops the EMULATED drives' process (it runs outside
the namespace, so it does not die with it)."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import psutil
import pytest

from gridxfer.movers import capabilities_of, mover_for
from gridxfer.testbed import netgrid, netns

pytestmark = [pytest.mark.root, pytest.mark.integration,
              pytest.mark.skipif(not netns.has_cap_net_admin(), reason="needs CAP_NET_ADMIN")]

TOPO = """\
name: t19t
controller: T1
tiers:
  - {name: T1, subnet: 198.19.70.0/24, hosts: [{name: tp1, role: storage, services: [xrootd-tape]}]}
links: []
"""


def test_a_tape_backed_host_reports_tape_and_down_stops_its_drives(controller_grid_lock,
                                                                    gridxfer_home, tmp_path):
    topo = tmp_path / "t19t.yaml"
    topo.write_text(TOPO)
    inv = netgrid.up(topo)
    st = json.loads(netgrid.state_path().read_text())
    try:
        ep = inv.endpoints["tp1-xrd"]
        assert ep.tape_backed and ep.url == "root://198.19.70.10:1094//data/"
        drives = st["pids"]["tp1-tape"]
        assert "gridxfer.testbed.tape" in " ".join(psutil.Process(drives).cmdline())
        f = Path(ep.data_dir) / "f.dat"
        f.write_bytes(os.urandom(1 << 20))
        os.chown(f, *(lambda s: (s.st_uid, s.st_gid))(Path(ep.data_dir).stat()))
        url = ep.url + "f.dat"
        tape = capabilities_of(mover_for(url)).tape
        deadline = time.monotonic() + 60
        while not (state := tape.archive_status([url])[url]).on_tape:
            assert time.monotonic() < deadline, state
            time.sleep(0.2)
        log = Path(ep.tape_log)     # the session's line comes after the unmount
        while not (log.exists() and 'mountType="ArchiveForUser"' in log.read_text()):
            assert time.monotonic() < deadline, "no session logged"
            time.sleep(0.2)
    finally:
        netgrid.down()
    assert not psutil.pid_exists(drives) or psutil.Process(drives).status() == "zombie"
