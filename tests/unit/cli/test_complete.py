"""Shell completion (issue 22e): click's completion protocol, run as a shell runs it
(`_GRIDXFER_COMPLETE=bash_complete`), completes campaign, profile and inventory names."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from gridxfer.campaign.journal import names, planning, store


def _complete(words: str, home, extra_env: dict | None = None) -> list[str]:
    line = f"gridxfer {words}"
    env = {**os.environ, "GRIDXFER_HOME": str(home), "_GRIDXFER_COMPLETE": "bash_complete",
           "COMP_WORDS": line, "COMP_CWORD": str(len(line.split()) - (0 if line.endswith(" ")
                                                                        else 1)),
           **(extra_env or {})}
    r = subprocess.run([sys.executable, "-c", "from gridxfer.cli.main import main; main()"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    # bash_complete prints "type,value" per line
    return [ln.split(",", 1)[1] for ln in r.stdout.splitlines() if "," in ln]


def test_campaign_and_endpoint_names(gridxfer_home):
    for name in ("sc-t0-t1", "sc-t0-t2", "other"):
        conn = store.connect(store.journal_path(name), create=True)
        planning.plan(conn, {"name": name, "state": "done",
                          **dict([names.meta_item({"root://se01.example//d/": "cnaf-se01"})])},
                   [("f", "root://s//f", 1, "T1", None)])
        conn.close()
    assert _complete("campaign status sc-", gridxfer_home) == ["sc-t0-t1", "sc-t0-t2"]
    assert _complete("campaign resume ", gridxfer_home) == ["other", "sc-t0-t1", "sc-t0-t2"]
    assert _complete("campaign report sc-t0-t1 --endpoint cn", gridxfer_home) == ["cnaf-se01"]
    assert _complete("campaign status other --tier ", gridxfer_home) == ["T1"]
    assert _complete("campaign sta", gridxfer_home) == ["status"]


def test_profile_names(gridxfer_home):
    got = _complete("tune show dtn-", gridxfer_home)
    assert "dtn-10g" in got and all(g.startswith("dtn-") for g in got)


def test_inventory_names(gridxfer_home):
    inv = gridxfer_home / "testbed"
    inv.mkdir()
    ep = {"name": "t1a-xrd1", "url": "root://127.0.0.1:1094//data/", "protocol": "root",
          "tier": "T1", "data_dir": "/tmp/x", "pid": 1, "log": "/tmp/x.log"}
    eps = {"t1a-xrd1": ep, "t1b-xrd1": {**ep, "name": "t1b-xrd1"}}
    (inv / "inventory.json").write_text(json.dumps(
        {"mode": "local", "base_dir": "/tmp/x", "endpoints": eps}))
    assert _complete("copy t1", gridxfer_home) == ["t1a-xrd1", "t1b-xrd1"]
    # no testbed: nothing offered, and no traceback
    (inv / "inventory.json").unlink()
    assert _complete("copy t1", gridxfer_home) == []
