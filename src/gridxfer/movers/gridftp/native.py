"""file -> gsiftp:// on gridxfer's own GSI client (movers/gridftp/client.py), one stream over
this thread's reused session: no new process and no new GSI handshake per file (0.3-1.5 s
each with the others, measured on loopback). One of the three implementations the GridFTP
route (movers/gridftp/mover.py) chooses among: the one for a single stream to a server the
client can authenticate to. A server that refuses it raises ``NativeUnavailable``, and the
route copies the file again with gfal2 (movers/gridftp/streamed.py)."""
from __future__ import annotations

from gridxfer.movers import routes
from gridxfer.movers.base import ProgressFn, TransferOutcome, TransferParams
from gridxfer.movers.gridftp.client import NativeGridFTP, refused
from gridxfer.movers.gridftp.control import NativeUnavailable
from gridxfer.movers.gridftp.ops import GridFTPMetadata, check_local_pair
from gridxfer.movers.integrity import verified_copy


class NativeUploadMover(GridFTPMetadata):
    name = "gridftp-native"
    schemes = routes.GRIDFTP_NATIVE.schemes
    pairs, tpc_pairs = routes.GRIDFTP_NATIVE.pairs, routes.GRIDFTP_NATIVE.tpc_pairs

    def copy(self, src: str, dst: str, *, params: TransferParams,
             progress: ProgressFn | None = None) -> TransferOutcome:
        check_local_pair(self, src, dst, params)
        refuse = dst if not params.overwrite else None

        def raw(s: str, tmp: str, report: ProgressFn | None) -> tuple[int, str]:
            return self.raw_copy(s, tmp, params, report, release_early=True, refuse=refuse)

        # verifying beside the next copy needs one more session per thread: cheap for
        # gridxfer's client (no delegation, 3 round trips); the existing destination is
        # refused in the upload's first flight, not by a stat before it
        return verified_copy(src, dst, params, src_ops=self._ops(src), dst_ops=self._ops(dst),
                             raw_copy=raw, progress=progress, early_release=True,
                             copy_checks_destination=True, mover=self.name)

    def raw_copy(self, src: str, dst: str, params: TransferParams,
                 progress: ProgressFn | None = None, *,
                 release_early: bool = False, refuse: str | None = None) -> tuple[int, str]:
        """Move the bytes only (no verification, no temp name): (streams used, mode).
        ``refuse``: a URL whose existence makes this an EXISTS error, checked in the
        upload's first flight. NativeUnavailable if the server refuses this client (now,
        or in the last RETRY_NATIVE s: then without trying again)."""
        if not NativeGridFTP.usable(dst):
            raise NativeUnavailable(refused(dst) or f"{dst}: gridxfer's GridFTP client is off")
        self._remote.native.upload(src, dst, params, progress, release_early=release_early,
                                   refuse=refuse)
        return 1, "gridftp-native"
