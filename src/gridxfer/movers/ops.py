"""The metadata operations a mover offers besides its copy (the ``Ops`` seam: stat,
checksum, unlink, mkdir, rename; ``ListingOps`` adds listdir), on file:// URLs
(``LocalOps``, plain POSIX) and handed on by URL (``DelegatedOps``); a local file's
adler32 and its mode once written."""
from __future__ import annotations

import functools
import os
from typing import Protocol
from collections.abc import Callable

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.adler import adler32
from gridxfer.movers.base import Entry, normalise_adler32, require_adler32
from gridxfer.movers.classify import transfer_error
from gridxfer.movers.names import join_url
from gridxfer.movers.urls import local_path


def adler32_file(path: str, cancel: Callable[[], bool] | None = None) -> str:
    value = 1
    with open(path, "rb") as fh:
        while chunk := fh.read(4 << 20):
            value = adler32(chunk, value)
            if cancel and cancel():
                raise TransferError(ErrorClass.CANCELLED, f"cancelled while checksumming {path}")
    return normalise_adler32(value)


class Ops(Protocol):
    def stat(self, url: str) -> Entry: ...
    def checksum(self, url: str, algorithm: str = "adler32") -> str: ...
    def unlink(self, url: str) -> None: ...
    def mkdir(self, url: str) -> None: ...
    def rename(self, src: str, dst: str) -> None: ...


class ListingOps(Ops, Protocol):
    def listdir(self, url: str) -> list[Entry]: ...


class LocalOps:
    """Metadata operations on file:// URLs (plain POSIX, no library)."""

    def stat(self, url: str) -> Entry:
        try:
            st = os.stat(local_path(url))
        except OSError as exc:
            raise transfer_error(exc, url) from None
        return Entry(url=url, size=st.st_size, is_dir=os.path.isdir(local_path(url)))

    def listdir(self, url: str) -> list[Entry]:
        base = local_path(url)
        try:
            names = sorted(os.listdir(base))
        except OSError as exc:
            raise transfer_error(exc, url) from None
        return [self.stat(join_url(url, n, check=False)) for n in names]

    def checksum(self, url: str, algorithm: str = "adler32") -> str:
        require_adler32(algorithm)
        try:
            return adler32_file(local_path(url))
        except OSError as exc:
            raise transfer_error(exc, url) from None

    def unlink(self, url: str) -> None:
        try:
            os.unlink(local_path(url))
        except OSError as exc:
            raise transfer_error(exc, url, side="destination") from None

    def mkdir(self, url: str) -> None:
        try:
            os.makedirs(local_path(url), exist_ok=True)
        except OSError as exc:
            raise transfer_error(exc, url, side="destination") from None

    def rename(self, src: str, dst: str) -> None:
        try:
            os.replace(local_path(src), local_path(dst))
        except OSError as exc:
            raise transfer_error(exc, dst, side="destination") from None

    def space(self, url: str) -> tuple[int, int]:
        st = os.statvfs(local_path(url))
        return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize


def normal_mode(path: str) -> None:
    """A local destination file gets a normal file's mode, 0644 minus the umask: gfal2's
    file plugin and globus-url-copy create theirs 0755."""
    try:
        os.chmod(path, 0o644 & ~_umask())
    except OSError as exc:
        raise transfer_error(exc, path, side="destination") from None


@functools.cache
def _umask() -> int:
    """The process umask, read without setting it (os.umask would, for every thread)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


class DelegatedOps:
    """Metadata operations of a mover that hands them to ``self._ops(url)`` (another
    mover or LocalOps, chosen by the URL), for movers that only own the copy."""

    def _ops(self, url: str) -> ListingOps:
        raise NotImplementedError

    def stat(self, url: str) -> Entry:
        return self._ops(url).stat(url)

    def listdir(self, url: str) -> list[Entry]:
        return self._ops(url).listdir(url)

    def checksum(self, url: str, algorithm: str = "adler32") -> str:
        return self._ops(url).checksum(url, algorithm)

    def unlink(self, url: str) -> None:
        self._ops(url).unlink(url)

    def mkdir(self, url: str) -> None:
        self._ops(url).mkdir(url)


class StatOnce:
    """``ops`` with one URL's stat already answered (a copy's source, asked once)."""

    def __init__(self, ops: Ops, entry: Entry) -> None:
        self._ops, self.entry = ops, entry

    def stat(self, url: str) -> Entry:
        return self.entry if url == self.entry.url else self._ops.stat(url)

    def checksum(self, url: str, algorithm: str = "adler32") -> str:
        return self._ops.checksum(url, algorithm)

    def unlink(self, url: str) -> None:
        self._ops.unlink(url)

    def mkdir(self, url: str) -> None:
        self._ops.mkdir(url)

    def rename(self, src: str, dst: str) -> None:
        self._ops.rename(src, dst)
