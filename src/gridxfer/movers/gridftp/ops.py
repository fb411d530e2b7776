"""The metadata operations (the Ops of movers/integrity.py) for gsiftp/ftp URLs: gridxfer's
own GridFTP client (movers/gridftp/client.py) where it can authenticate, gfal2 where it cannot
or for what it does not do (listing, ftp://)."""
from __future__ import annotations

from gridxfer.movers.base import Entry
from gridxfer.movers.gridftp.control import NativeUnavailable
from gridxfer.movers.gridftp.client import NativeGridFTP


class GridFTPOps:
    """``native`` where ``usable``, else ``fallback`` (a GfalMover)."""

    def __init__(self, fallback) -> None:
        self.native, self.fallback = NativeGridFTP(), fallback

    def _either(self, url: str, op: str, *args):
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
