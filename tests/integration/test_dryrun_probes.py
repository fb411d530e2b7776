"""`campaign run --dry-run` probes real endpoints once (issue 22): XRootD and FTP servers
of the local grid answer (reachable, a probe file written and deleted, free space where
the protocol tells), a port where nothing listens is flagged, and a tier with no usable
endpoint fails the dry run as it would fail the run's files."""
from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from gridxfer.cli.main import main

from tests.integration.test_campaign_grid import seed, write_spec

pytestmark = pytest.mark.integration


def _dead_port() -> int:
    with socket.socket() as s:            # bound, never listening: connections are refused
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dry_run_probes_real_endpoints(local_grid, local_grid_home, tmp_path, capsys):
    seed(local_grid, "t0-xrd", "dry", [10, 20, 30])
    dead = f"root://127.0.0.1:{_dead_port()}//dry/"
    spec = write_spec(tmp_path, f"""\
campaign: dry
source: {{url: "t0-xrd/dry/", files: {{glob: "*.dat"}}}}
destinations:
  - tier: T1A
    pool: ["t1a-xrd1/dry/", "{dead}"]
  - tier: T1B
    pool: ["t1b-ftp/dry/"]
retries: {{max: 1, backoff: 0.2s}}
timeout: 60s
""")
    assert main(["campaign", "run", "--dry-run", "--json", str(spec)]) == 0, \
        capsys.readouterr().err
    plan = json.loads(capsys.readouterr().out)["run"]["plan"]
    probes = {p["url"]: p for p in plan["probes"]}
    xrd = local_grid.endpoints["t1a-xrd1"]
    good = next(u for u in probes if u.endswith("/dry/") and u != dead
                and probes[u]["role"] == "T1A")
    assert probes[good]["problem"] == "" and probes[good]["reachable"] is True
    assert probes[good]["writable"] is True
    assert probes[dead]["problem"] and probes[dead]["reachable"] is False
    ftp = next(p for p in plan["probes"] if p["role"] == "T1B")
    assert ftp["problem"] == "" and ftp["writable"] is True
    src = next(p for p in plan["probes"] if p["role"] == "source")
    assert src["problem"] == "" and src["reachable"] is True
    assert [t["files"] for t in plan["tiers"]] == [3, 3]
    left = [p.name for p in (Path(xrd.data_dir) / "dry").iterdir()]
    assert not any("probe" in n for n in left), left          # probe files deleted

    only_dead = write_spec(tmp_path, spec.read_text().replace(
        '["t1b-ftp/dry/"]', f'["{dead}"]'), name="dead.yaml")
    assert main(["campaign", "run", "--dry-run", str(only_dead)]) == 3
    out, err = capsys.readouterr()
    assert f"T1B: {dead}: FLAGGED: " in out
    assert "no endpoint of tier T1B can be used" in err
