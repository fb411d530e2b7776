"""The issue 22 story on a real XRootD server: a destination file exists, the campaign
fails it ("exists and overwrite is off") and says what to do; `overwrite: true` in the file
is shown by `resume`, and applied by `resume --reload --retry-failed`, which replaces it."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gridxfer.cli.main import main

from tests.integration.test_campaign_grid import adler32, seed, write_spec

pytestmark = pytest.mark.integration


def test_overwrite_applied_by_reload_on_xrootd(local_grid, local_grid_home, tmp_path, capsys):
    expected = seed(local_grid, "t0-xrd", "reload", [1000, 2000, 3000])
    data = Path(local_grid.endpoints["t1a-xrd1"].data_dir)
    dst_dir = data / "reload"
    dst_dir.mkdir(parents=True, exist_ok=True)
    (dst_dir / "f001.dat").write_bytes(b"an older copy")
    owner = data.stat()                     # the server's user must own what it replaces
    for p in (dst_dir, dst_dir / "f001.dat"):
        os.chown(p, owner.st_uid, owner.st_gid)
    text = """\
campaign: reload-x
source: {url: "t0-xrd/reload/", files: {glob: "*.dat"}}
destinations:
  - {tier: T1, pool: ["t1a-xrd1/reload/"], max_active: 2}
retries: {max: 1, backoff: 0.2s}
timeout: 60s
"""
    spec = write_spec(tmp_path, text)
    assert main(["campaign", "run", "--quiet", str(spec)]) == 3
    out, err = capsys.readouterr()
    assert "FAILED T1 f001.dat: exists: " in out, out
    assert "set `overwrite: true` in the campaign file, then `gridxfer campaign resume " \
           "reload-x --reload --retry-failed`" in err

    spec.write_text(text + "overwrite: true\n")
    assert main(["campaign", "resume", "--quiet", "--retry-failed", "reload-x"]) == 3
    out = capsys.readouterr().out
    assert "  overwrite: false -> true\n" in out and "not applied" in out
    assert (dst_dir / "f001.dat").read_bytes() == b"an older copy"

    assert main(["campaign", "resume", "--json", "--retry-failed", "--reload", "reload-x"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["run"]["reloaded"] is True and res["files"]["failed"] == 0
    assert {n: adler32(dst_dir / n) for n in expected} == expected
