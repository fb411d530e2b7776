"""file <-> gsiftp/ftp on gfal2's streamed copy (one stream, in this process, over this
thread's reused gfal2 session: no process and no GSI handshake per file). One of the three
implementations the GridFTP route (movers/gridftp/mover.py) chooses among: the one for a
single stream where gridxfer's own client cannot serve (downloads, ftp://, a server that
refused the client, GRIDXFER_GRIDFTP=gfal2). Metadata: movers/gridftp/ops.py."""
from __future__ import annotations

from gridxfer.movers import routes
from gridxfer.movers.base import ProgressFn, TransferOutcome, TransferParams
from gridxfer.movers.gfal.mover import streamed_copy
from gridxfer.movers.gridftp.ops import GridFTPMetadata, check_local_pair


class GfalStreamedMover(GridFTPMetadata):
    name = "gridftp-gfal2"
    schemes = routes.GRIDFTP_GFAL.schemes
    pairs, tpc_pairs = routes.GRIDFTP_GFAL.pairs, routes.GRIDFTP_GFAL.tpc_pairs

    def copy(self, src: str, dst: str, *, params: TransferParams,
             progress: ProgressFn | None = None) -> TransferOutcome:
        check_local_pair(self, src, dst, params)
        return self.verified(src, dst, params, progress)

    def raw_copy(self, src: str, dst: str, params: TransferParams,
                 progress: ProgressFn | None = None) -> tuple[int, str]:
        """Move the bytes only (no verification, no temp name): (streams used, mode)."""
        return streamed_copy(src, dst, params, progress)
