"""Free space of a token-protected XRootD (the testbed's t2-tok1: ztn + SciTokens) is asked
with the endpoint's token, as its copies are (policy/space.py): a run's exclusions can then
see a full endpoint before its writes fail, and `run --dry-run` reports the free space.
Without the token the server refuses the stat and the query: free space unknown."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gridxfer.testbed import tokens as tok_mod

from tests.integration.test_campaign_tokens import PROTOCOLS, env_for

pytestmark = pytest.mark.integration

# Run in a child: XrdCl reads its TLS settings (the auth grid's CA) once per process.
_CHILD = """
import json, sys
from gridxfer.campaign.policy.space import SpaceWatcher, query_free
from gridxfer.movers.tokens import host_of, using_hosts
url, token = sys.argv[1], sys.stdin.read().strip()
hosts = {host_of(url): token}
out = {"without": query_free(url)}
with using_hosts(hosts):
    out["with"] = query_free(url)
w = SpaceWatcher(tokens=lambda: hosts, period=0.2, min_interval=0.05)
try:
    w.watch([url])
    import time
    deadline = time.monotonic() + 20
    while w.free(url) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    out["watcher"] = w.free(url)
finally:
    w.close()
print(json.dumps(out))
"""


def test_free_space_of_a_token_server_is_asked_with_its_token(auth_grid, tmp_path):
    issuer = tok_mod.load_issuer(Path(auth_grid.extra["issuer"]))
    token = tok_mod.mint(issuer, ["storage.read:/", "storage.create:/space"])
    url = auth_grid.resolve(f"{PROTOCOLS['root']}/space/not-yet/")
    env = env_for(auth_grid, tmp_path / "home")
    res = subprocess.run([sys.executable, "-c", _CHILD, url], input=token, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert token.rsplit(".", 1)[1] not in res.stdout + res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["without"] is None                   # refused: unknown, as before
    assert isinstance(out["with"], int) and out["with"] > 0, out
    assert isinstance(out["watcher"], int) and out["watcher"] > 0, out
