"""The GridFTP route for file <-> gsiftp/ftp: a dispatcher whose only job is to pick, for each
copy, one of three implementation movers (each registered in movers/routes.py, loaded on
first use) by the rule ``choose``, best first:

  streams > 1, or GRIDXFER_GUC_ALWAYS=1         globus-url-copy -p N (globus.py): MODE E,
                                                N data connections, one process per file
  file -> gsiftp, gridxfer's client usable       gridftp-native (native.py): gridxfer's GSI
                                                client, over this thread's reused session
  any other one-stream copy                     gridftp-gfal2 (streamed.py): gfal2's streamed
                                                copy, over this thread's reused gfal2 session

"Usable": GRIDXFER_GRIDFTP is not ``gfal2`` and the server has not refused the client in
the last RETRY_NATIVE s (client.refused). A server that refuses it during a copy (it is
then remembered) makes that copy start again on gridftp-gfal2, once. The environment is read at each
copy. The rule depends on the copy's ``params``, so it runs per copy, here, not in the
registry (which routes by scheme pair only); ``TransferOutcome.mover`` names what ran.
"""
from __future__ import annotations

import os
from typing import cast

from gridxfer.movers import routes
from gridxfer.movers.base import ProgressFn, RawMover, TransferOutcome, TransferParams
from gridxfer.movers.gridftp.client import NativeGridFTP
from gridxfer.movers.gridftp.control import NativeUnavailable
from gridxfer.movers.gridftp.ops import GridFTPMetadata, check_local_pair
from gridxfer.movers.urls import scheme_of


def guc_always() -> bool:
    """GRIDXFER_GUC_ALWAYS=1: every copy through a globus-url-copy process (the behaviour
    before the session-reusing implementations)."""
    return os.environ.get("GRIDXFER_GUC_ALWAYS", "") in ("1", "true", "yes")


def choose(src: str, dst: str, params: TransferParams) -> routes.Route:
    """The implementation for this copy (the rule in the module docstring)."""
    if int(params.streams) > 1 or guc_always():
        return routes.GUC
    if scheme_of(src) == "file" and NativeGridFTP.usable(dst):
        return routes.GRIDFTP_NATIVE
    return routes.GRIDFTP_GFAL


def implementation(src: str, dst: str, params: TransferParams) -> RawMover:
    """The one shared instance of the implementation ``choose`` names."""
    return cast(RawMover, choose(src, dst, params).load())


def _gfal2() -> RawMover:
    return cast(RawMover, routes.GRIDFTP_GFAL.load())


class GridFTPMover(GridFTPMetadata):
    """file <-> gsiftp/ftp: ``choose`` per copy, then that implementation's ``copy``."""

    name = "gridftp"
    schemes, pairs, tpc_pairs = routes.GRIDFTP_LOCAL.schemes, routes.GRIDFTP_LOCAL.pairs, \
        routes.GRIDFTP_LOCAL.tpc_pairs

    def copy(self, src: str, dst: str, *, params: TransferParams,
             progress: ProgressFn | None = None) -> TransferOutcome:
        check_local_pair(self, src, dst, params)
        try:
            return implementation(src, dst, params).copy(src, dst, params=params,
                                                         progress=progress)
        except NativeUnavailable:       # refused now (remembered): gfal2 for this server
            return _gfal2().copy(src, dst, params=params, progress=progress)

    def raw_copy(self, src: str, dst: str, params: TransferParams,
                 progress: ProgressFn | None = None) -> tuple[int, str]:
        """The bytes only, by the implementation ``choose`` picks (the spool mover's legs)."""
        try:
            return implementation(src, dst, params).raw_copy(src, dst, params, progress)
        except NativeUnavailable:
            return _gfal2().raw_copy(src, dst, params, progress)
