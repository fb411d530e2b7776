"""Cross-protocol copies through this host (root <-> gsiftp/ftp) in two native legs.

gfal2's streamed copy between protocols uses one TCP stream, and gsiftp -> root with
gfal2 2.21 reorders 256 KiB blocks (caught by our adler32, but never succeeds). So the
data is pulled into a local spool file with the best native client (XrdCl substreams, or
for GridFTP what the GridFTP route picks: globus-url-copy -p N for several streams,
gridxfer's own client or gfal2 for one; movers/gridftp/mover.py), then pushed to the
destination's temporary name the same way.
The usual integrity path (size + adler32 against the source, then rename) wraps both.
The spool file lives in $GRIDXFER_SPOOL (default: the system temp dir) and is always
removed; files left by a process killed with -9 (their pid is in the name) are swept by
the next process that spools.
"""
from __future__ import annotations

import os
import re
import tempfile
import threading

from gridxfer.errors import UsageError
from gridxfer.movers import routes
from gridxfer.movers.base import ProgressFn, RawMover, TransferOutcome, TransferParams
from gridxfer.movers.integrity import verified_copy
from gridxfer.movers.ops import DelegatedOps, ListingOps
from gridxfer.movers.gfal.mover import GfalMover
from gridxfer.movers.gridftp.mover import GridFTPMover
from gridxfer.movers.urls import scheme_of
from gridxfer.movers.xrootd.mover import XRootDMover
import contextlib


_PREFIX = ".gxspool-"
_OWNER = re.compile(re.escape(_PREFIX) + r"(\d+)-")
_swept: set[str] = set()
_sweep_lock = threading.Lock()


def spool_dir() -> str:
    path = os.environ.get("GRIDXFER_SPOOL") or tempfile.gettempdir()
    os.makedirs(path, exist_ok=True)
    with _sweep_lock:
        if path not in _swept:
            _swept.add(path)
            sweep_stale(path)
    return path


def sweep_stale(path: str) -> list[str]:
    """Remove spool files of processes that no longer exist; returns their names."""
    import psutil               # here, not at import: 15-19 ms a campaign need not pay
    removed = []
    for name in os.listdir(path):
        owner = _OWNER.match(name)
        pid = int(owner.group(1)) if owner else None
        if pid is not None and pid != os.getpid() and not psutil.pid_exists(pid):
            try:
                os.unlink(os.path.join(path, name))
                removed.append(name)
            except OSError:
                pass
    return removed


class SpoolMover(DelegatedOps):
    name = "spool"
    schemes, pairs, tpc_pairs = routes.SPOOL.schemes, routes.SPOOL.pairs, routes.SPOOL.tpc_pairs

    def __init__(self) -> None:
        self._xrd, self._gx, self._gfal = XRootDMover(), GridFTPMover(), GfalMover()

    def _leg(self, url: str) -> RawMover:
        """The GridFTP leg goes by the GridFTP route's rule (movers/gridftp/mover.py)."""
        return self._xrd if scheme_of(url) == "root" else self._gx

    def _ops(self, url: str) -> ListingOps:
        return self._xrd if scheme_of(url) == "root" else self._gfal

    def copy(self, src: str, dst: str, *, params: TransferParams,
             progress: ProgressFn | None = None) -> TransferOutcome:
        pair = (scheme_of(src), scheme_of(dst))
        if pair not in self.pairs:
            raise UsageError(f"spool mover cannot copy {src} -> {dst}")
        if params.third_party:
            raise UsageError(f"third-party copy is impossible between {pair[0]}:// and "
                             f"{pair[1]}://: {src} -> {dst}")

        def raw(s: str, tmp: str, report: ProgressFn | None) -> tuple[int, str]:
            fd, spool = tempfile.mkstemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=spool_dir())
            os.close(fd)
            os.unlink(spool)   # the leg's client creates it (xrdcp refuses an existing file)
            half = {"first": 0}

            def first(done: int, total: int | None) -> None:
                half["first"] = done
                if report:
                    report(done // 2, total)

            def second(done: int, total: int | None) -> None:
                if report:
                    report(half["first"] // 2 + done // 2, total)

            try:
                n1, m1 = self._leg(s).raw_copy(s, "file://" + spool, params, first)
                n2, m2 = self._leg(tmp).raw_copy("file://" + spool, tmp, params, second)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(spool)
            return min(n1, n2), f"spool:{m1}+{m2}"

        # A GridFTP destination is verified over this thread's GSI session: no early release
        # (it would need one more session per thread, as in the gfal2 mover).
        return verified_copy(src, dst, params, src_ops=self._ops(src), dst_ops=self._ops(dst),
                             raw_copy=raw, progress=progress,
                             early_release=scheme_of(dst) not in routes.GRIDFTP, mover=self.name)
