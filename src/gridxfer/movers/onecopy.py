"""One-off copies (`gridxfer copy SRC... DST`) with the campaign's integrity path.

No copy code of its own: the registry picks the mover a campaign would use for the pair
of schemes (``get_mover``), and that mover's ``copy`` runs the one integrity path
(``integrity.verified_copy``: temporary name, size + adler32, rename; nothing partial is
left on any failure, Ctrl-C included, because the cancel flag reaches the mover).

What is the habit of gfal-copy and xrdcp here: a bare path is a local file; a destination
that ends in ``/`` or is an existing directory receives the source's base name (several
sources need one); an existing destination is an error unless ``overwrite`` (``-f``).
"""
from __future__ import annotations

import os
from urllib.parse import urlsplit
from dataclasses import asdict, dataclass, replace
from typing import Any
from collections.abc import Sequence

from gridxfer.errors import ErrorClass, TransferError, UsageError
from gridxfer.movers.base import (Cancel, ProgressFn, TransferOutcome, TransferParams,
                                  normalise_adler32)
from gridxfer.movers.capabilities import capabilities_of
from gridxfer.movers.names import join_url, listed_name
from gridxfer.movers.integrity import checksum_policy, destination_exists, exists
from gridxfer.movers.ops import LocalOps
from gridxfer.movers.registry import get_mover, mover_for
from gridxfer.movers.urls import scheme_of, split_dir
from gridxfer.redact import WHERE_CREDENTIALS_GO, credential_in_url, redact

CHECKSUM_MODES = {"source": "source", "target": "destination", "destination": "destination",
                  "both": "both", "none": "none"}


@dataclass(frozen=True)
class CopyPlan:
    """One source and the destination URL it goes to, with the mover that will copy it."""
    src: str
    dst: str
    size: int
    mover: str


@dataclass(frozen=True)
class CopyResult:
    src: str
    dst: str
    ok: bool
    bytes: int = 0
    seconds: float = 0.0
    checksum: str | None = None
    streams: int = 0
    mode: str = ""
    error_class: str | None = None
    error: str | None = None
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def to_url(arg: str) -> str:
    """A command-line argument as a URL: URLs pass, a path becomes ``file://`` + its
    absolute path (never decoded: ``a?b`` is the file ``a?b``). A credential in a URL is
    refused, as in campaign files."""
    if not arg or "\x00" in arg:
        raise UsageError(f"not a URL or path: {arg!r}")
    if "://" not in arg:
        path = os.path.abspath(arg)
        return "file://" + path + ("/" if arg.endswith("/") and path != "/" else "")
    what = credential_in_url(arg)
    if what:
        raise UsageError(f"the URL {redact(arg)!r} carries {what}: {WHERE_CREDENTIALS_GO}")
    try:
        parts = urlsplit(arg)
        _ = parts.hostname, parts.port      # a malformed [IPv6] host, a port not 0-65535
    except ValueError as exc:
        raise UsageError(f"not a URL: {arg!r}: {exc}") from None
    if scheme_of(arg) != "file" and "://" in arg and not arg.split("://", 1)[1].split("/")[0]:
        raise UsageError(f"URL has no host: {arg}")
    return arg


def checksum_params(option: str | None, mode: str | None) -> tuple[str | None, str, str | None]:
    """``-K ALGORITHM[:VALUE]`` and ``--checksum-mode`` as (algorithm, verify, expected).
    The default is the campaign's: adler32 on both ends."""
    algo, _, value = (option or "adler32").partition(":")
    if algo.lower() != "adler32":
        raise UsageError(f"-K {option}: unsupported checksum algorithm {algo!r} "
                         f"(every mover compares adler32; give ADLER32 or ADLER32:VALUE)")
    expected = None
    if value:
        text = value.strip().lower().removeprefix("0x")
        if not text or len(text) > 8 or any(c not in "0123456789abcdef" for c in text):
            raise UsageError(f"-K {option}: {value!r} is not an adler32 value "
                             f"(up to 8 hexadecimal digits)")
        expected = normalise_adler32(text)
    verify = CHECKSUM_MODES.get((mode or "both").lower())
    if verify is None:
        raise UsageError(f"--checksum-mode {mode}: use source, target (destination), both "
                         f"or none")
    if verify == "none" and expected:
        raise UsageError(f"-K {option} gives a value to compare, but --checksum-mode is none")
    return (None if verify == "none" else "adler32"), verify, expected


def destinations(srcs: Sequence[str], dst: str) -> list[tuple[str, str]]:
    """(source URL, destination URL) pairs: a directory destination receives each
    source's base name; several sources need a directory destination."""
    into_dir = dst.endswith("/") or _is_dir(dst)
    if len(srcs) > 1 and not into_dir:
        raise UsageError(f"{len(srcs)} sources need a directory destination "
                         f"({redact(dst)} is not one; end it with '/')")
    pairs = []
    for src in srcs:
        if into_dir:        # the raw name, carried as the destination's protocol needs
            split_dir(src)                          # a URL without a file name: refused
            pairs.append((src, join_url(dst, listed_name(src))))
        else:
            pairs.append((src, dst))
    return pairs


def ops_for(url: str) -> Any:
    """Metadata operations for one URL: plain POSIX for local files (no gfal2 import)."""
    return LocalOps() if scheme_of(url) == "file" else mover_for(url)


def _is_dir(url: str) -> bool:
    stat = capabilities_of(ops_for(url)).stat
    if stat is None:
        return False
    try:
        return stat(url).is_dir
    except TransferError:
        return False


def plan_copy(src: str, dst: str, params: TransferParams) -> CopyPlan:
    """What ``copy`` would do, checked as it would check (``--dry-run``): the mover for
    the pair, the source's size (a directory or a missing source is refused), an existing
    destination without overwrite refused."""
    mover = get_mover(src, dst, third_party=params.third_party)
    entry = ops_for(src).stat(src)
    if entry.is_dir:
        raise TransferError(ErrorClass.OTHER, f"{src}: source is a directory")
    if not params.overwrite and exists(ops_for(dst), dst):
        raise destination_exists(dst)
    return CopyPlan(src, dst, entry.size, mover.name)


def copy_one(src: str, dst: str, params: TransferParams, *,
             progress: ProgressFn | None = None) -> CopyResult:
    """Copy ``src`` to ``dst`` through the registry's mover (its integrity path); a
    failure is a CopyResult with the error class, never a partial file."""
    checksum_policy(params)                 # refuse a bad algorithm before any I/O
    try:
        mover = get_mover(src, dst, third_party=params.third_party)
        out: TransferOutcome = mover.copy(src, dst, params=params, progress=progress)
    except TransferError as exc:
        return CopyResult(src, dst, False, error_class=exc.error_class.value,
                          error=redact(str(exc)))
    return CopyResult(src, dst, True, out.bytes, round(out.seconds, 3), out.checksum,
                      out.streams_used, out.mode)


def dry_run_one(src: str, dst: str, params: TransferParams) -> CopyResult:
    try:
        p = plan_copy(src, dst, params)
    except TransferError as exc:
        return CopyResult(src, dst, False, error_class=exc.error_class.value,
                          error=redact(str(exc)), dry_run=True)
    return CopyResult(src, dst, True, p.size, mode=p.mover, streams=params.streams,
                      dry_run=True)


def with_cancel(params: TransferParams, cancel: Cancel) -> TransferParams:
    return replace(params, cancel=cancel)
