"""One name per endpoint with real servers (issue 22a/h): a campaign over the local grid's
XRootD and FTP servers, named by the testbed inventory, a `name:`, or a bare URL, shows
the same names in status --json, the report's tables and the Nagios perfdata labels."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from gridxfer.cli.main import main
from tests.integration.test_campaign_grid import seed, write_spec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "monitoring"))
from monfixtures import run_check  # noqa: E402

pytestmark = pytest.mark.integration


def test_names_from_inventory_name_key_and_url(local_grid, local_grid_home, tmp_path, capsys):
    seed(local_grid, "t0-xrd", "c-names", [1000, 70_000, 300_000, 5])
    ftp = local_grid.endpoints["t1b-ftp"].url + "c-names/"      # a bare URL, ephemeral port
    xrd2 = local_grid.endpoints["t1a-xrd2"].url + "c-names/"
    spec = write_spec(tmp_path, f"""\
campaign: c-names
source: {{url: "t0-xrd/c-names/", files: {{glob: "*.dat"}}}}
destinations:
  - tier: T1A
    pool: ["t1a-xrd1/c-names/", {{url: "{xrd2}", name: pic-disk}}]
  - tier: T1B
    pool: ["{ftp}"]
retries: {{max: 1, backoff: 0.2s}}
timeout: 60s
""")
    assert main(["campaign", "run", "--quiet", str(spec)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["campaign", "status", "c-names", "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    eps = st["endpoints"]
    port = local_grid.endpoints["t1b-ftp"].port
    dests = {eps[u] for u in eps if u != local_grid.endpoints["t0-xrd"].url + "c-names/"}
    assert dests == {"t1a-xrd1/c-names", "pic-disk", f"127.0.0.1:{port}"}, eps
    assert main(["campaign", "report", "c-names"]) == 0
    text = capsys.readouterr().out
    assert "t1a-xrd1/c-names" in text and "pic-disk" in text and ftp not in text, text

    r = run_check("throughput", "-C", "c-names", "-W", "1h", "--per-endpoint",
                  "--baseline", "none")
    labels = re.findall(r"'?(ep_[^=']+)'?=", r.stdout.split("|", 1)[1])
    assert sorted(labels) == sorted(f"ep_{n}_MBps" for n in dests), r.stdout
    assert all(len(x) < 32 for x in labels), labels
