"""davhead.adler32_of: the adler32 of an RFC 3230 ``Digest`` header, or None (the caller
then asks gfal2). The requests themselves: tests/integration/test_davs_movers.py."""
from __future__ import annotations

import pytest

from gridxfer.movers.gfal.davhead import adler32_of


@pytest.mark.parametrize("header, want", [
    ("adler32=0a1b2c3d", "0a1b2c3d"),
    ("ADLER32=A1B2C3", "00a1b2c3"),                          # zero-padded, lower case
    ("md5=HUXZLQLMuI/KZ5KDcJPcOA==, adler32=deadbeef", "deadbeef"),
    (" adler32 = 1 ", "00000001"),
])
def test_read(header, want):
    assert adler32_of(header) == want


@pytest.mark.parametrize("header", ["", "md5=HUXZLQLMuI/KZ5KDcJPcOA==", "adler32=",
                                    "adler32=xyz", "adler32=123456789", "crc32c=0a1b2c3d"])
def test_none(header):
    assert adler32_of(header) is None
