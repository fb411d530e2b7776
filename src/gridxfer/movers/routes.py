"""What each built-in mover can copy, without importing it: a root:// campaign must not pay
for gfal2, psutil and globus-url-copy's mover at start-up (~40 ms of a 3-s small-file run),
nor a gsiftp:// one for XRootD. The mover classes take their tables from here (one source);
``registry`` imports a mover's module the first time a copy or URL needs it."""
from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass, field
from typing import Any

from gridxfer.movers.base import Mover, Pairs

GRIDFTP = frozenset({"gsiftp", "ftp"})
HTTP = frozenset({"davs", "https"})
_GFAL_SCHEMES = frozenset({"gsiftp", "ftp", "root", "file"})


@dataclass(frozen=True)
class Route:
    """A built-in mover's routing table; ``load()`` gives its one shared instance."""
    module: str
    cls: str
    schemes: frozenset[str]
    pairs: Pairs
    tpc_pairs: Pairs = frozenset()
    metadata_for: tuple[str, ...] = ()              # schemes whose stat/listdir it answers
    _cell: list[Mover] = field(default_factory=list, compare=False, repr=False)
    _lock: Any = field(default_factory=threading.Lock, compare=False, repr=False)

    def load(self) -> Mover:
        if not self._cell:
            with self._lock:
                if not self._cell:
                    self._cell.append(getattr(importlib.import_module(self.module), self.cls)())
        return self._cell[0]


XROOTD = Route("gridxfer.movers.xrootd.mover", "XRootDMover", frozenset({"root"}),
               frozenset({("file", "root"), ("root", "file"), ("root", "root")}),
               frozenset({("root", "root")}), metadata_for=("root",))
_LOCAL_GRIDFTP = frozenset({("file", s) for s in GRIDFTP} | {(s, "file") for s in GRIDFTP})
# file <-> gsiftp/ftp: a dispatcher that picks one of the three implementations below per
# copy, by streams, GRIDXFER_GUC_ALWAYS and the servers that refused gridxfer's own client
# (movers/gridftp/mover.py: ``choose``)
GRIDFTP_LOCAL = Route("gridxfer.movers.gridftp.mover", "GridFTPMover", GRIDFTP, _LOCAL_GRIDFTP)
GRIDFTP_NATIVE = Route("gridxfer.movers.gridftp.native", "NativeUploadMover",
                       frozenset({"gsiftp"}), frozenset({("file", "gsiftp")}))
GRIDFTP_GFAL = Route("gridxfer.movers.gridftp.streamed", "GfalStreamedMover", GRIDFTP,
                     _LOCAL_GRIDFTP)
GUC = Route("gridxfer.movers.gridftp.globus", "GlobusUrlCopyMover", GRIDFTP, _LOCAL_GRIDFTP)
SPOOL = Route("gridxfer.movers.spool", "SpoolMover", frozenset({"root"} | GRIDFTP),
              frozenset({("root", g) for g in GRIDFTP} | {(g, "root") for g in GRIDFTP}))
GFAL = Route("gridxfer.movers.gfal.mover", "GfalMover", _GFAL_SCHEMES,
             frozenset((a, b) for a in _GFAL_SCHEMES for b in _GFAL_SCHEMES),
             frozenset((a, b) for a in GRIDFTP for b in GRIDFTP),
             metadata_for=("gsiftp", "ftp", "file"))
# davs/https with anything gfal2 reads, streamed through this host (gfal2's HTTP plugin);
# davs/https -> davs/https also as HTTP-TPC (movers/gfal/davs.py, httptpc.py)
_HTTP_PEERS = frozenset({"file", "root", *GRIDFTP, *HTTP})
DAVS = Route("gridxfer.movers.gfal.davs", "DavsMover", HTTP,
             frozenset({(a, b) for a in _HTTP_PEERS for b in HTTP}
                       | {(b, a) for a in _HTTP_PEERS for b in HTTP}),
             frozenset((a, b) for a in HTTP for b in HTTP), metadata_for=tuple(sorted(HTTP)))

BUILTINS = (XROOTD, GRIDFTP_LOCAL, SPOOL, DAVS, GFAL)     # priority order (registry docstring)
GRIDFTP_IMPLEMENTATIONS = (GRIDFTP_NATIVE, GRIDFTP_GFAL, GUC)     # chosen by GRIDFTP_LOCAL
