"""The metadata operations (the Ops of movers/integrity.py) for gsiftp/ftp URLs: gridxfer's
own GridFTP client (movers/gridftp/client.py) where it can authenticate, gfal2 where it cannot
or for what it does not do (listing, ftp://). ``GridFTPMetadata`` gives them, and LocalOps
for file://, to each of the file <-> gsiftp/ftp movers."""
from __future__ import annotations

from typing import Any

from gridxfer.errors import UsageError
from gridxfer.movers.base import Entry, Mover, ProgressFn, TransferOutcome, TransferParams
from gridxfer.movers.gfal.mover import GfalMover
from gridxfer.movers.gridftp.client import NativeGridFTP
from gridxfer.movers.gridftp.control import NativeUnavailable
from gridxfer.movers.integrity import verified_copy
from gridxfer.movers.ops import DelegatedOps, ListingOps, LocalOps
from gridxfer.movers.urls import scheme_of


class GridFTPOps:
    """``native`` where ``usable``, else ``fallback`` (a GfalMover)."""

    def __init__(self, fallback: GfalMover) -> None:
        self.native, self.fallback = NativeGridFTP(), fallback

    def _either(self, url: str, op: str, *args: Any) -> Any:
        if self.native.usable(url):
            try:
                return getattr(self.native, op)(*args)
            except NativeUnavailable:
                pass                    # remembered in _REFUSED: gfal2 for RETRY_NATIVE s
        return getattr(self.fallback, op)(*args)

    def stat(self, url: str) -> Entry:
        return self._either(url, "stat", url)

    def checksum(self, url: str, algorithm: str = "adler32") -> str:
        return self._either(url, "checksum", url, algorithm)

    def unlink(self, url: str) -> None:
        self._either(url, "unlink", url)

    def mkdir(self, url: str) -> None:
        self._either(url, "mkdir", url)

    def rename(self, src: str, dst: str) -> None:
        self._either(dst, "rename", src, dst)

    def listdir(self, url: str) -> list[Entry]:
        return self.fallback.listdir(url)


class GridFTPMetadata(DelegatedOps):
    """stat / listdir / checksum / unlink / mkdir of a file <-> gsiftp/ftp mover: LocalOps
    for file://, ``GridFTPOps`` for the remote end."""

    name: str

    def __init__(self) -> None:
        self._remote = GridFTPOps(GfalMover())

    def _ops(self, url: str) -> ListingOps:
        return LocalOps() if scheme_of(url) == "file" else self._remote

    def raw_copy(self, src: str, dst: str, params: TransferParams,
                 progress: ProgressFn | None = None) -> tuple[int, str]:
        """Move the bytes only (no verification, no temp name): (streams used, mode)."""
        raise NotImplementedError

    def verified(self, src: str, dst: str, params: TransferParams,
                 progress: ProgressFn | None) -> TransferOutcome:
        """``raw_copy`` inside the integrity path, verified after the copy on this thread's
        session (verifying beside the next copy would need one more GSI session per
        thread)."""

        def raw(s: str, tmp: str, report: ProgressFn | None) -> tuple[int, str]:
            return self.raw_copy(s, tmp, params, report)

        return verified_copy(src, dst, params, src_ops=self._ops(src), dst_ops=self._ops(dst),
                             raw_copy=raw, progress=progress, early_release=False,
                             mover=self.name)


def check_local_pair(mover: Mover, src: str, dst: str, params: TransferParams) -> None:
    """UsageError unless ``mover`` copies this pair (one end local: never third-party)."""
    if (scheme_of(src), scheme_of(dst)) not in mover.pairs:
        raise UsageError(f"{mover.name} mover cannot copy {src} -> {dst}")
    if params.third_party:
        raise UsageError(f"third-party copy is impossible with a local end: {src} -> {dst}")
