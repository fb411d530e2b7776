"""`gridxfer campaign verify` on the real local grid: a finished campaign's destinations
(XRootD and GSI GridFTP) checked against the sources; a missing, a truncated and a
corrupted copy reported; --fix removes the bad copies and requeues, and resume copies
them again."""
from __future__ import annotations

import json
import os
import sqlite3

import pytest

from gridxfer.cli.main import main

pytestmark = pytest.mark.integration


def _seed(inv, n: int) -> None:
    root = inv.local_path(inv.endpoints["t0-xrd"].url + "c-verify/")
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)
    for i in range(n):
        (root / f"f{i}.dat").write_bytes(os.urandom(200_000 + i))
        os.chmod(root / f"f{i}.dat", 0o644)


def _done_rows(home) -> list[sqlite3.Row]:
    conn = sqlite3.connect(home / "campaigns" / "c-verify.sqlite")
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute("SELECT * FROM files ORDER BY id").fetchall()
    finally:
        conn.close()


def test_verify_reports_and_fixes_missing_and_different_copies(local_grid, local_grid_home,
                                                                tmp_path, capsys):
    _seed(local_grid, 6)
    spec = tmp_path / "c.yaml"
    spec.write_text("""\
campaign: c-verify
source: {url: "t0-xrd/c-verify/", files: {glob: "*.dat"}}
destinations:
  - tier: T1A
    pool: ["t1a-xrd1/c-verify/", "t1a-gsiftp/c-verify/"]
    max_active: 2
retries: {max: 1, backoff: 0.2s}
timeout: 60s
""")
    assert main(["campaign", "run", "--quiet", "--selector", "round-robin", str(spec)]) == 0
    assert main(["campaign", "verify", "c-verify"]) == 0
    assert "6 done files checked: 6 match" in capsys.readouterr().out

    rows = _done_rows(local_grid_home)
    assert {r["dst_url"].split(":")[0] for r in rows} == {"root", "gsiftp"}
    paths = [local_grid.local_path(r["dst_url"]) for r in rows]
    paths[0].unlink()                                   # missing
    with open(paths[1], "r+b") as fh:                   # truncated
        fh.truncate(1000)
    data = bytearray(paths[2].read_bytes())             # same size, one byte changed
    data[5000] ^= 0xFF
    mtime = paths[2].stat().st_mtime
    paths[2].write_bytes(bytes(data))
    # XRootD keeps a file's adler32 in its user.XrdCks.adler32 attribute with the file's
    # mtime in whole seconds, and answers from it while they agree: a rewrite in the same
    # second as the first verify would be answered from the attribute. A later rewrite:
    os.utime(paths[2], (mtime + 5, mtime + 5))

    assert main(["campaign", "verify", "c-verify", "--json"]) == 3
    res = json.loads(capsys.readouterr().out)
    assert (res["checked"], res["matching"], res["missing"], res["size"], res["checksum"]) == \
        (6, 3, 1, 1, 1)
    assert {i["file_id"]: i["problem"] for i in res["issues"]} == \
        {rows[0]["id"]: "missing", rows[1]["id"]: "size", rows[2]["id"]: "checksum"}

    assert main(["campaign", "verify", "c-verify", "--fix"]) == 3
    cap = capsys.readouterr()
    assert "2 bad copies removed, 3 files requeued" in cap.out
    assert "campaign resume c-verify" in cap.err
    assert not paths[1].exists() and not paths[2].exists()
    assert [r["state"] for r in _done_rows(local_grid_home)][:3] == ["pending"] * 3

    assert main(["campaign", "resume", "--quiet", "c-verify"]) == 0
    capsys.readouterr()
    from gridxfer.campaign.journal.lock import CampaignLock
    with CampaignLock("c-verify"):          # a runner holds it: --fix refuses, verify reads
        assert main(["campaign", "verify", "c-verify", "--fix"]) == 2
        assert "already being run" in capsys.readouterr().err
        assert main(["campaign", "verify", "c-verify", "--tier", "T1A"]) == 0
    capsys.readouterr()
    assert main(["campaign", "verify", "c-verify"]) == 0
    assert "6 match, 0 missing, 0 different" in capsys.readouterr().out


def test_verify_of_an_unknown_campaign_is_one_line(gridxfer_home, capsys):
    assert main(["campaign", "verify", "nope"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "no such campaign" in err
