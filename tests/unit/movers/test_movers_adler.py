"""movers.adler: the fast adler32 gives zlib's values, including a running value."""
from __future__ import annotations

import os
import zlib

import pytest

from gridxfer.movers import adler
from gridxfer.movers.ops import adler32_file


def test_zlib_ng_is_the_one_in_use():
    assert adler.IMPLEMENTATION == "zlib-ng"


@pytest.mark.parametrize("size", [0, 1, 15, 5552, 5553, 65_536, 3_000_001])
def test_same_values_as_zlib(size):
    data = os.urandom(size)
    assert adler.adler32(data) == zlib.adler32(data)
    assert adler.adler32(data, 0xDEADBEEF) == zlib.adler32(data, 0xDEADBEEF)


def test_file_checksum_spans_chunks(tmp_path):
    data = os.urandom((4 << 20) * 2 + 12345)
    (tmp_path / "f").write_bytes(data)
    assert adler32_file(str(tmp_path / "f")) == f"{zlib.adler32(data):08x}"
