"""`gridxfer testbed up` on a generated netns topology, for the WAN benchmarks (bench.wan,
bench.smallwan): the servers run as an unprivileged user under ``work``."""
from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.common import PYTHON, BenchError, env_vars


@contextlib.contextmanager
def netns_testbed(work: Path, topology: str, filename: str) -> Iterator[Any]:
    """Bring ``topology`` (YAML text) up under ``work``; yields the inventory, with the
    client environment set, and brings it down again."""
    from gridxfer.testbed.inventory import load_inventory
    topo = work / filename
    topo.write_text(topology)
    os.chmod(work, 0o755)
    home = work / "home"
    home.mkdir(mode=0o700, exist_ok=True)
    gx = str(Path(PYTHON).parent / "gridxfer")
    env = {**os.environ, "GRIDXFER_HOME": str(home), "GRIDXFER_TESTBED_DIR": str(work)}
    with env_vars({"GRIDXFER_HOME": str(home), "GRIDXFER_TESTBED_DIR": str(work)}):
        try:
            up = subprocess.run([gx, "testbed", "up", str(topo)], env=env, capture_output=True,
                                text=True, timeout=600)
            if up.returncode != 0:
                raise BenchError(f"testbed up failed: {(up.stderr or up.stdout).strip()[-400:]}")
            inv = load_inventory()
            if inv.mode != "netns":
                raise BenchError(f"testbed came up in {inv.mode} mode, not netns")
            with env_vars(inv.client_env()):
                yield inv
        finally:
            subprocess.run([gx, "testbed", "down"], env=env, capture_output=True, timeout=300)
