"""`gridxfer copy` in-process between local files (gfal2's file plugin through the registry;
no servers): --json, -q, several sources, exit codes. The grid protocols are in
tests/integration/test_copy_cli.py."""
from __future__ import annotations

import json
import os
import zlib

from gridxfer.cli.main import main


def test_json_quiet_and_several_sources(tmp_path, gridxfer_home, capsys):
    a, b = tmp_path / "a.dat", tmp_path / "b.dat"
    a.write_bytes(os.urandom(10_000))
    b.write_bytes(os.urandom(20_000))
    out = tmp_path / "out"
    out.mkdir()
    assert main(["copy", "--json", str(a), str(b), str(out)]) == 0
    res = json.loads(capsys.readouterr().out)
    assert [(r["ok"], r["bytes"], r["checksum"]) for r in res] == \
        [(True, 10_000, f"{zlib.adler32(a.read_bytes()):08x}"),
         (True, 20_000, f"{zlib.adler32(b.read_bytes()):08x}")]
    assert main(["copy", "-q", str(a), str(b), str(out) + "/"]) == 1     # both exist
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.count("error: exists:") == 2
    assert "all 2 copies failed" in cap.err
    assert main(["copy", "-q", "-f", str(a), str(tmp_path / "missing"), str(out)]) == 3
    assert "source_missing" in capsys.readouterr().err
    assert sorted(os.listdir(out)) == ["a.dat", "b.dat"]
