"""Routing by URL scheme: the right mover per pair, clear refusals otherwise."""
from __future__ import annotations

import pytest

from gridxfer.errors import UsageError
from gridxfer.movers import capabilities_of, get_mover, mover_for
from gridxfer.movers.base import Mover

R, G, F, L = "root://h:1//d/f", "gsiftp://h:2/d/f", "ftp://h:3/d/f", "file:///tmp/f"


@pytest.mark.parametrize("src,dst,tpc,name", [
    (L, R, False, "xrootd"), (R, L, False, "xrootd"), (R, R, False, "xrootd"),
    (R, R, True, "xrootd"),
    ("xroot://h:1//d/f", "/tmp/f", False, "xrootd"),
    (L, G, False, "gridftp"), (G, L, False, "gridftp"),
    (L, F, False, "gridftp"), (F, L, False, "gridftp"),
    (G, G, False, "gfal2"), (G, G, True, "gfal2"), (F, G, True, "gfal2"),
    (R, G, False, "spool"), (G, R, False, "spool"), (F, R, False, "spool"),
    (L, L, False, "gfal2"),
])
def test_routes(src, dst, tpc, name):
    mover = get_mover(src, dst, third_party=tpc)
    assert mover.name == name and isinstance(mover, Mover)
    pair = (src.split(":", 1)[0].replace("xroot", "root"),
            "file" if dst.startswith("/") else dst.split(":", 1)[0])
    assert pair in (mover.tpc_pairs if tpc else mover.pairs)   # the tables it routes by
    assert capabilities_of(mover).third_party == bool(mover.tpc_pairs)


@pytest.mark.parametrize("url,name", [(R, "xrootd"), (G, "gfal2"), (F, "gfal2"), (L, "gfal2"),
                                      ("/abs/path", "gfal2")])
def test_metadata_mover(url, name):
    mover = mover_for(url)
    assert mover.name == name
    caps = capabilities_of(mover)
    assert all((caps.stat, caps.listdir, caps.checksum, caps.unlink, caps.mkdir))


@pytest.mark.parametrize("src,dst", [(L, R), (R, G), (L, G), (L, L), (G, R)])
def test_third_party_refused_for_impossible_pairs(src, dst):
    with pytest.raises(UsageError, match="third-party copy is not possible"):
        get_mover(src, dst, third_party=True)


def test_unknown_scheme_names_the_url():
    with pytest.raises(UsageError, match=r"unsupported URL scheme 's3': s3://x/y"):
        get_mover("s3://x/y", R)
    with pytest.raises(UsageError, match=r"s3://b/k"):
        mover_for("s3://b/k")
    with pytest.raises(UsageError):
        get_mover("", R)


def _modules_after(code: str) -> set[str]:
    import subprocess
    import sys
    code += "\nimport sys\nprint(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code],
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
                "gridxfer.movers.gridftp.mover", "gridxfer.movers.gridftp.client",
                "gridxfer.movers.spool"} & root
    gsi = _modules_after("from gridxfer.movers.registry import get_mover\n"
                         "m = get_mover('gsiftp://h/a', 'gsiftp://g/b', third_party=True)\n"
                         "assert type(m).__name__ == 'GfalMover'")
    assert "gfal2" in gsi and not {"XRootD", "gridxfer.movers.xrootd.mover"} & gsi


def test_routes_are_the_movers_own_tables():
    from gridxfer.movers import routes
    from gridxfer.movers.registry import movers
    loaded = {type(m).__name__: m for m in movers()}
    loaded.update({r.cls: r.load() for r in routes.GRIDFTP_IMPLEMENTATIONS})
    for route in routes.BUILTINS + routes.GRIDFTP_IMPLEMENTATIONS:
        mover = loaded[route.cls]
        assert isinstance(mover, Mover)
        assert (mover.schemes, mover.pairs, mover.tpc_pairs) == \
            (route.schemes, route.pairs, route.tpc_pairs)
        assert route.load() is mover            # one shared instance per built-in


class _Ops:
    """An ops object with some of the operations only."""

    def stat(self, url):
        return url

    def unlink(self, url):
        return None


def test_capabilities_are_the_methods_an_object_has():
    caps = capabilities_of(_Ops())
    assert caps.stat is not None and caps.unlink is not None
    assert caps.listdir is caps.checksum is caps.mkdir is caps.space is None
    assert not caps.third_party                 # not a Mover: no tpc_pairs
    assert capabilities_of(None) == capabilities_of(object())
    assert capabilities_of(mover_for(R)).space is not None            # XRootD: query space
    assert capabilities_of(get_mover(L, G)).space is None             # GridFTP: none


class _Data:
    name, schemes, pairs, tpc_pairs = "d", frozenset(), frozenset(), frozenset({("a", "b")})

    def copy(self, src, dst, *, params, progress=None):
        return None


class _NoneOp(_Ops):
    listdir = None              # an attribute that is None is no operation


def test_capabilities_agree_with_isinstance_on_every_protocol():
    from gridxfer.movers import base, capabilities
    from gridxfer.movers.tape import Releases, TapeOps
    protos = (base.Stats, base.Lists, base.Checksums, base.Unlinks, base.MakesDirs,
              base.HasSpace, base.Mover, TapeOps, Releases, base.Connects, base.CopiesMany)
    objs = (None, object(), _Ops(), _Data(), _NoneOp(), mover_for(R), get_mover(L, G))
    for obj in objs:
        for proto in protos:
            assert capabilities._is(obj, proto) is isinstance(obj, proto), (obj, proto)
    assert capabilities_of(_Data()).third_party
    assert capabilities_of(_NoneOp()).listdir is None
