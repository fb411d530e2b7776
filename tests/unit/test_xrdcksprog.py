"""xrdcksprog.py, the XRootD checksum program, run as xrootd runs it (python3 -S, argv)."""
from __future__ import annotations

import os
import subprocess
import zlib
from pathlib import Path

import pytest

from gridxfer.testbed import xrdcksprog
from gridxfer.testbed.xrootd import CKS_PYTHON

PROG = Path(xrdcksprog.__file__)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CKS_PYTHON, "-S", str(PROG), *args], capture_output=True, text=True,
                          timeout=30)


@pytest.mark.parametrize("size", [0, 1, 65_521, 65_536, 3 * 4096 + 7])
def test_prints_zlib_adler32(tmp_path, size):
    data = os.urandom(size)
    (tmp_path / "f").write_bytes(data)
    res = run(str(tmp_path), "/f")
    assert (res.returncode, res.stdout) == (0, f"{zlib.adler32(data):08x}\n")


def test_missing_file_and_directory_fail_with_a_message(tmp_path):
    (tmp_path / "d").mkdir()
    for lfn in ("/none", "/d"):
        res = run(str(tmp_path), lfn)
        assert res.returncode == 1 and res.stdout == "" and lfn in res.stderr


@pytest.mark.parametrize("lfn", ["relative", "/a/../../etc/passwd", "/x\ny"])
def test_refuses_paths_outside_the_root(tmp_path, lfn):
    res = run(str(tmp_path), lfn)
    assert res.returncode == 2 and res.stdout == ""


def test_wrong_arguments_are_a_usage_error():
    assert run().returncode == 2
