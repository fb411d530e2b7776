"""What each built-in mover can copy, without importing it: a root:// campaign must not pay
for gfal2, psutil and globus-url-copy's mover at start-up (~40 ms of a 3-s small-file run),
nor a gsiftp:// one for XRootD. The mover classes take their tables from here (one source);
``registry`` imports a mover's module the first time a copy or URL needs it."""
from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass, field
from typing import Any

GRIDFTP = frozenset({"gsiftp", "ftp"})
_GFAL_SCHEMES = frozenset({"gsiftp", "ftp", "root", "file"})
Pairs = frozenset[tuple[str, str]]


@dataclass(frozen=True)
class Route:
    """A built-in mover's routing table; ``load()`` gives its one shared instance."""
    module: str
    cls: str
    schemes: frozenset[str]
    pairs: Pairs
    tpc_pairs: Pairs = frozenset()
    metadata_for: tuple[str, ...] = ()              # schemes whose stat/listdir it answers
    _cell: list = field(default_factory=list, compare=False, repr=False)
    _lock: Any = field(default_factory=threading.Lock, compare=False, repr=False)

    def load(self) -> Any:
        if not self._cell:
            with self._lock:
                if not self._cell:
                    self._cell.append(getattr(importlib.import_module(self.module), self.cls)())
        return self._cell[0]


XROOTD = Route("gridxfer.movers.xrootd.mover", "XRootDMover", frozenset({"root"}),
               frozenset({("file", "root"), ("root", "file"), ("root", "root")}),
               frozenset({("root", "root")}), metadata_for=("root",))
GLOBUS = Route("gridxfer.movers.gridftp.globus", "GlobusUrlCopyMover", GRIDFTP,
               frozenset({("file", s) for s in GRIDFTP} | {(s, "file") for s in GRIDFTP}))
SPOOL = Route("gridxfer.movers.spool", "SpoolMover", frozenset({"root"} | GRIDFTP),
              frozenset({("root", g) for g in GRIDFTP} | {(g, "root") for g in GRIDFTP}))
GFAL = Route("gridxfer.movers.gfal.mover", "GfalMover", _GFAL_SCHEMES,
             frozenset((a, b) for a in _GFAL_SCHEMES for b in _GFAL_SCHEMES),
             frozenset((a, b) for a in GRIDFTP for b in GRIDFTP),
             metadata_for=("gsiftp", "ftp", "file"))

BUILTINS = (XROOTD, GLOBUS, SPOOL, GFAL)            # priority order (registry docstring)
