"""Routing by URL scheme: the right mover per pair, clear refusals otherwise."""
from __future__ import annotations

import pytest

from gridxfer.errors import UsageError
from gridxfer.movers import get_mover, mover_for
from gridxfer.movers.base import Mover

R, G, F, L = "root://h:1//d/f", "gsiftp://h:2/d/f", "ftp://h:3/d/f", "file:///tmp/f"


@pytest.mark.parametrize("src,dst,tpc,name", [
    (L, R, False, "xrootd"), (R, L, False, "xrootd"), (R, R, False, "xrootd"), (R, R, True, "xrootd"),
    ("xroot://h:1//d/f", "/tmp/f", False, "xrootd"),
    (L, G, False, "globus-url-copy"), (G, L, False, "globus-url-copy"),
    (L, F, False, "globus-url-copy"), (F, L, False, "globus-url-copy"),
    (G, G, False, "gfal2"), (G, G, True, "gfal2"), (F, G, True, "gfal2"),
    (R, G, False, "spool"), (G, R, False, "spool"), (F, R, False, "spool"),
    (L, L, False, "gfal2"),
])
def test_routes(src, dst, tpc, name):
    mover = get_mover(src, dst, third_party=tpc)
    assert mover.name == name and isinstance(mover, Mover)
    assert mover.capabilities.streams


@pytest.mark.parametrize("url,name", [(R, "xrootd"), (G, "gfal2"), (F, "gfal2"), (L, "gfal2"),
                                      ("/abs/path", "gfal2")])
def test_metadata_mover(url, name):
    mover = mover_for(url)
    assert mover.name == name
    assert all(hasattr(mover, op) for op in ("stat", "listdir", "checksum", "unlink", "mkdir"))


@pytest.mark.parametrize("src,dst", [(L, R), (R, G), (L, G), (L, L), (G, R)])
def test_third_party_refused_for_impossible_pairs(src, dst):
    with pytest.raises(UsageError, match="third-party copy is not possible"):
        get_mover(src, dst, third_party=True)


def test_unknown_scheme_names_the_url():
    with pytest.raises(UsageError, match=r"unsupported URL scheme 'https': https://x/y"):
        get_mover("https://x/y", R)
    with pytest.raises(UsageError, match=r"s3://b/k"):
        mover_for("s3://b/k")
    with pytest.raises(UsageError):
        get_mover("", R)
