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


def _modules_after(code: str) -> set[str]:
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint(' '.join(sys.modules))"],
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_a_mover_is_imported_only_when_a_copy_needs_it():
    """A root:// campaign does not pay for gfal2, psutil or globus-url-copy's mover at
    start-up, nor a gsiftp:// one for XRootD (routes.py)."""
    root = _modules_after("from gridxfer.movers.registry import get_mover, mover_for\n"
                          "m = get_mover('file:///a', 'root://h//b'); mover_for('root://h//b')\n"
                          "assert type(m).__name__ == 'XRootDMover'")
    assert "gridxfer.movers.xrootd.mover" in root
    assert not {"gfal2", "psutil", "gridxfer.movers.gfal.mover", "gridxfer.movers.gridftp.globus",
                "gridxfer.movers.spool"} & root
    gsi = _modules_after("from gridxfer.movers.registry import get_mover\n"
                         "m = get_mover('gsiftp://h/a', 'gsiftp://g/b', third_party=True)\n"
                         "assert type(m).__name__ == 'GfalMover'")
    assert "gfal2" in gsi and not {"XRootD", "gridxfer.movers.xrootd.mover"} & gsi


def test_routes_are_the_movers_own_tables():
    from gridxfer.movers import routes
    from gridxfer.movers.registry import movers
    loaded = {type(m).__name__: m for m in movers()}
    for route in routes.BUILTINS:
        mover = loaded[route.cls]
        assert (mover.schemes, mover.pairs, mover.tpc_pairs) == \
            (route.schemes, route.pairs, route.tpc_pairs)
        assert route.load() is mover            # one shared instance per built-in
