"""The official FTS3 client is imported only by the FTS3 engine (campaign/fts3/official.py):
its import costs every local-engine ``campaign run`` 0.2 s of start-up otherwise. The same
for ``requests`` (the FTS3 client's error mapping, 30 ms) and PyJWT (a token's claims,
35 ms): a campaign start without FTS3 or tokens imports neither."""
from __future__ import annotations

import subprocess
import sys

LAZY = ("fts3", "M2Crypto", "requests", "jwt")
PROBE = ("import sys, gridxfer.cli.main, gridxfer.campaign.runner, gridxfer.campaign.cancel; "
         f"print(sorted(m for m in sys.modules if m.split('.')[0] in {LAZY!r}))")


def test_a_local_engine_start_does_not_import_the_official_client() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_the_engine_gets_the_official_modules_on_first_use() -> None:
    from gridxfer.campaign.fts3 import official
    assert official.easy().__name__ == "fts3.rest.client.easy"
    assert hasattr(official.errors(), "NotFound")
    assert official.easy() is official.easy()
