"""Movers registered by URL scheme; the scheduler asks here, never branches on classes.

``get_mover(src, dst, third_party=...)`` picks the mover for a copy. Routing, best first:
  root <-> file, root -> root          native XRootD (substreams honour ``streams``; root TPC)
  file <-> gsiftp / ftp                the GridFTP route: per copy, globus-url-copy -p N,
                                       gridxfer's own client or gfal2 (movers/gridftp/mover.py)
  gsiftp / ftp <-> gsiftp / ftp        gfal2 native GridFTP (server to server, nbstreams)
  root <-> gsiftp / ftp                spool: two native legs through a local file
  davs / https <-> file, root, gsiftp,  gfal2's HTTP plugin, streamed through this host;
    ftp, davs / https                  davs/https -> davs/https with third_party: HTTP-TPC
  anything else gfal2 can do           gfal2 streamed copy (1 stream; reported as such)
``mover_for(url)`` gives the mover for stat / listdir / checksum / unlink / mkdir / space.
Built-in movers are imported the first time a copy or URL needs them (routes.py): the
registry holds a ``routes.Route`` (the tables, no import) until then. Both give a ``Mover``.
"""
from __future__ import annotations

import threading

from gridxfer.errors import UsageError
from gridxfer.movers import routes
from gridxfer.movers.base import Mover
from gridxfer.movers.urls import scheme_of

_lock = threading.Lock()
_load_lock = threading.Lock()
Registered = Mover | routes.Route
_movers: list[Registered] = []         # in priority order: movers, or routes.Route (not loaded yet)
_meta: dict[str, Registered] = {}      # scheme -> mover (or Route) for metadata operations
_loaded = False


def register(mover: Registered, *, metadata_for: tuple[str, ...] = (), first: bool = False) -> None:
    """Add a mover. ``metadata_for`` lists schemes whose stat/listdir it answers."""
    with _lock:
        if first:
            _movers.insert(0, mover)
        else:
            _movers.append(mover)
        for scheme in metadata_for:
            _meta[scheme] = mover


def _load_builtins() -> None:
    global _loaded
    if _loaded:
        return
    with _load_lock:        # concurrent first callers (worker threads) wait until loaded
        if _loaded:
            return
        for route in routes.BUILTINS:
            register(route, metadata_for=route.metadata_for)
        _loaded = True


def _live(entry: Registered) -> Mover:
    """The mover behind a registry entry (a built-in's module is imported on first use)."""
    return entry.load() if isinstance(entry, routes.Route) else entry


def _scheme(url: str) -> str:
    if not isinstance(url, str) or not url:
        raise UsageError(f"not a URL: {url!r}")
    return scheme_of(url)


def movers() -> list[Mover]:
    _load_builtins()
    return [_live(m) for m in list(_movers)]


def get_mover(src_url: str, dst_url: str, *, third_party: bool = False) -> Mover:
    """The mover for copying ``src_url`` to ``dst_url``; UsageError if none can."""
    pair = (_scheme(src_url), _scheme(dst_url))
    _load_builtins()
    known = {s for m in _movers for s in m.schemes} | {"file"}
    for url, scheme in zip((src_url, dst_url), pair, strict=False):
        if scheme not in known:
            raise UsageError(f"unsupported URL scheme {scheme!r}: {url}")
    for mover in _movers:
        table = mover.tpc_pairs if third_party else mover.pairs
        if pair in table:
            return _live(mover)
    if third_party:
        raise UsageError(f"third-party copy is not possible from {pair[0]}:// to {pair[1]}:// "
                         f"({src_url} -> {dst_url}); TPC needs gsiftp/ftp, root or davs/https "
                         "on both ends")
    raise UsageError(f"no mover can copy {src_url} -> {dst_url}")


def tpc_possible(src_url: str, dst_url: str) -> bool:
    """Some mover copies ``src_url`` -> ``dst_url`` server to server (its ``tpc_pairs``): a
    campaign with ``third_party`` uses TPC for such pairs and streams the others."""
    pair = (_scheme(src_url), _scheme(dst_url))
    _load_builtins()
    return any(pair in m.tpc_pairs for m in list(_movers))


def mover_for(url: str) -> Mover:
    """The mover answering stat / listdir / checksum / unlink / mkdir for ``url``."""
    scheme = _scheme(url)
    _load_builtins()
    try:
        return _live(_meta[scheme])
    except KeyError:
        raise UsageError(f"unsupported URL scheme {scheme!r}: {url}") from None
