"""davs:// and HTTP-TPC in the netns grid: every storage host's xrootd also speaks HTTPS
(XrdHttp over TLS with the grid's test CA) on port 1094, across the emulated WAN."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gridxfer.testbed import netgrid, netns

pytestmark = [pytest.mark.root, pytest.mark.integration,
              pytest.mark.skipif(not netns.has_cap_net_admin(), reason="needs CAP_NET_ADMIN")]

TOPO = """\
name: t20d
controller: null
tiers:
  - {name: A, subnet: 198.19.94.0/24, hosts: [{name: da, role: storage, services: [xrootd]}]}
  - {name: B, subnet: 198.19.95.0/24, hosts: [{name: db, role: storage, services: [xrootd]}]}
links:
  - {between: [A, B], rate: 200Mbit, rtt: 4ms}
"""
DATA = os.urandom(2 << 20)


def in_ns(host: str, argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", netgrid.ns_name("t20d", host), *argv],
                          capture_output=True, text=True, timeout=120, env=env)


def test_davs_upload_and_http_tpc_pull_across_the_wan(gridxfer_home, tmp_path):
    topo = tmp_path / "t20d.yaml"
    topo.write_text(TOPO)
    inv = netgrid.up(topo)
    try:
        a, b = inv.endpoints["da-xrd"], inv.endpoints["db-xrd"]
        assert a.davs_url == "davs://198.19.94.10:1094/data/" and a.davs_auth == "none"
        assert inv.resolve("db-davs/f") == "davs://198.19.95.10:1094/data/f"
        env = {**os.environ, **inv.client_env()}
        src = tmp_path / "src.dat"
        src.write_bytes(DATA)
        os.chmod(tmp_path, 0o755)
        res = in_ns("da", ["gfal-copy", str(src), inv.resolve("db-davs/up/f.dat")], env)
        assert res.returncode == 0, res.stderr
        assert (Path(b.data_dir) / "up/f.dat").read_bytes() == DATA
        # pull: da copies from db (COPY to the destination with Source:), server to server
        res = in_ns("da", ["curl", "-sS", "--capath", env["X509_CERT_DIR"], "-X", "COPY",
                           "-H", "Source: https://198.19.95.10:1094/data/up/f.dat",
                           "https://198.19.94.10:1094/data/pulled.dat"], env)
        assert res.returncode == 0 and "success" in res.stdout, res.stdout + res.stderr
        assert (Path(a.data_dir) / "pulled.dat").read_bytes() == DATA
    finally:
        netgrid.down()
