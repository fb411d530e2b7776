"""globus-url-copy mover for file <-> gsiftp/ftp with real parallel streams.

gfal2 copies file<->gsiftp as a single-stream "streamed" copy; ``globus-url-copy -p N``
uses MODE E with N data connections, and ``-tcp-bs`` sets the per-stream buffer.
Credentials come from the usual X509_* environment (X509_USER_PROXY, X509_CERT_DIR),
inherited by the child. Remote metadata (stat, checksum, rename) goes through gfal2.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from urllib.parse import urlsplit

from gridxfer.errors import ErrorClass, TransferError, UsageError
from gridxfer.movers import routes
from gridxfer.movers.base import Capabilities, ProgressFn, TransferOutcome, TransferParams
from gridxfer.movers.classify import one_line, transfer_error
from gridxfer.movers.integrity import (DelegatedOps, LocalOps, destination_exists, exists,
                                    verified_copy)
from gridxfer.movers.gfal.mover import GfalMover
from gridxfer.movers.gridftp.client import NativeGridFTP
from gridxfer.movers.gridftp.ops import GridFTPOps
from gridxfer.movers.gridftp.control import NativeUnavailable
from gridxfer.movers import names
from gridxfer.movers.urls import scheme_of
from gridxfer.redact import credential_in_url, redact

_BYTES = re.compile(rb"(\d+) bytes")
# streams == 1 goes through gfal2 with session reuse; GRIDXFER_GUC_ALWAYS=1 forces a
# globus-url-copy process for every transfer (the behaviour before).
_SESSIONS = os.environ.get("GRIDXFER_GUC_ALWAYS", "") not in ("1", "true", "yes")


def _gx_url(url: str) -> str:
    """globus-url-copy wants file:///abs/path for local files, percent-encoded: it decodes
    them (a local 'a%2fb' would be read as 'a/b'). gsiftp:// URLs are already encoded."""
    return names.tool_url(url) if scheme_of(url) == "file" else url


def _native_upload(src: str, dst: str, params: TransferParams) -> bool:
    """One-stream file -> gsiftp copies go over gridxfer's own GridFTP client."""
    return (int(params.streams) <= 1 and _SESSIONS and scheme_of(src) == "file"
            and NativeGridFTP.usable(dst))


def command(src: str, dst: str, params: TransferParams) -> list[str]:
    """The globus-url-copy argument list for one transfer (no shell)."""
    args = ["globus-url-copy", "-vb", "-cd", "-p", str(max(1, int(params.streams)))]
    if params.tcp_buffer:
        args += ["-tcp-bs", str(int(params.tcp_buffer))]
    stall = int(min(params.timeout, 600))
    args += ["-stall-timeout", str(max(stall, 1)), _gx_url(src), _gx_url(dst)]
    return args


class GlobusUrlCopyMover(DelegatedOps):
    name = "globus-url-copy"
    schemes, pairs, tpc_pairs = routes.GLOBUS.schemes, routes.GLOBUS.pairs, routes.GLOBUS.tpc_pairs
    capabilities = Capabilities(checksum=True, third_party=False, stat=True, listdir=True,
                                mkdir=True, unlink=True, space=False, streams=True)

    def __init__(self, binary: str = "globus-url-copy") -> None:
        self.binary = binary
        self._gfal = GfalMover()
        self._remote = GridFTPOps(self._gfal)

    # Metadata of remote URLs: gridxfer's GridFTP client, gfal2 where it cannot be used.
    def _ops(self, url: str):
        return LocalOps() if scheme_of(url) == "file" else self._remote

    def copy(self, src: str, dst: str, *, params: TransferParams,
             progress: ProgressFn | None = None) -> TransferOutcome:
        pair = (scheme_of(src), scheme_of(dst))
        if pair not in self.pairs:
            raise UsageError(f"globus-url-copy mover cannot copy {src} -> {dst}")
        if params.third_party:
            raise UsageError(f"third-party copy is impossible with a local end: {src} -> {dst}")
        if shutil.which(self.binary) is None:
            raise UsageError(f"{self.binary} not found (install globus-gass-copy-progs)")

        native = _native_upload(src, dst, params)
        refuse = dst if native and not params.overwrite else None

        def raw(s: str, tmp: str, report: ProgressFn | None) -> tuple[int, str]:
            return self.raw_copy(s, tmp, params, report, release_early=True, refuse=refuse)

        return verified_copy(src, dst, params, src_ops=self._ops(src), dst_ops=self._ops(dst),
                             raw_copy=raw, progress=progress,
                             # verifying beside the next copy needs one more session per
                             # thread: cheap for gridxfer's GridFTP client (no delegation,
                             # 3 round trips), a GSI handshake of 0.5-3 s with gfal2
                             early_release=native, copy_checks_destination=native)

    def raw_copy(self, src: str, dst: str, params: TransferParams,
                 progress: ProgressFn | None = None, *,
                 release_early: bool = False, refuse: str | None = None) -> tuple[int, str]:
        """Move the bytes only (no verification, no temp name): (streams used, mode).
        ``refuse``: a URL whose existence makes this an EXISTS error, checked in the upload's
        first flight by gridxfer's client, before the copy by the others.

        One stream asked for: over this thread's reused GridFTP session (no new process,
        no new GSI handshake per file: 0.3-1.5 s each, measured on loopback): uploads to
        gsiftp:// with gridxfer's own client (movers/gridftp/client.py), the rest in-process on
        gfal2. More streams: ``globus-url-copy -p N`` (MODE E), one process per file.
        """
        if _native_upload(src, dst, params):
            try:
                self._remote.native.upload(src, dst, params, progress,
                                           release_early=release_early, refuse=refuse)
                return 1, "gridftp-native"
            except NativeUnavailable:
                pass                    # gfal2 for this server while it is refused (RETRY_NATIVE)
        if refuse is not None and exists(self._remote, refuse):
            raise destination_exists(refuse)
        if int(params.streams) <= 1 and _SESSIONS:
            return self._gfal._filecopy(src, dst, params, progress, (scheme_of(src), scheme_of(dst)))
        self._run(command(src, dst, params), params, progress, remote_src=scheme_of(src) != "file")
        return max(1, int(params.streams)), "globus-url-copy"

    def _run(self, args: list[str], params: TransferParams, progress: ProgressFn | None,
             *, remote_src: bool) -> None:
        args = [self.binary] + args[1:]
        if any(credential_in_url(a) for a in args):     # argv is world-readable (ps)
            raise TransferError(ErrorClass.PERMISSION, redact(
                f"{args[-2]} -> {args[-1]}: a URL carries a credential, which is never put "
                f"on a command line: use a grid proxy (X509_USER_PROXY)"))
        proc = subprocess.Popen(_dies_with_us(args), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        self.last_pid = proc.pid
        errors: list[bytes] = []
        err_reader = threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True)
        err_reader.start()
        out_reader = threading.Thread(target=self._read_progress, args=(proc, progress), daemon=True)
        out_reader.start()
        deadline = time.monotonic() + params.timeout
        watchdog = _DataWatchdog(proc.pid, _control_port(args[-2], args[-1]))
        reason: ErrorClass | None = None
        why = ""
        while proc.poll() is None:
            try:
                proc.wait(timeout=0.25)
            except subprocess.TimeoutExpired:
                pass
            if params.cancel is not None and params.cancel.is_set():
                reason, why = ErrorClass.CANCELLED, "cancelled"
            elif time.monotonic() > deadline:
                reason, why = ErrorClass.TIMEOUT, f"not finished within {params.timeout:g} s"
            elif watchdog.stalled():
                reason, why = ErrorClass.OTHER, (
                    f"globus-url-copy hung without data connections for "
                    f"{DATA_GONE_LIMIT:g} s (seen when the destination is full)")
            if reason is not None:
                _kill(proc)
                break
        proc.wait()
        err_reader.join(5)
        out_reader.join(5)
        stderr = b"".join(errors).decode(errors="replace")
        if reason is not None:
            raise TransferError(reason, f"{args[-2]} -> {args[-1]}: {why}")
        if proc.returncode != 0:
            done = subprocess.CompletedProcess(args, proc.returncode, "", stderr)
            side = _side(stderr, remote_src)
            raise transfer_error(done, f"globus-url-copy {args[-2]} -> {args[-1]}", side=side) \
                if stderr.strip() else TransferError(ErrorClass.OTHER, one_line(
                    f"globus-url-copy exited {proc.returncode}: {args[-2]} -> {args[-1]}"))

    @staticmethod
    def _read_progress(proc: subprocess.Popen, progress: ProgressFn | None) -> None:
        buf = b""
        while chunk := proc.stdout.read1(4096):
            if progress is None:
                continue
            buf = (buf + chunk)[-512:]
            found = _BYTES.findall(buf)
            if found:
                progress(int(found[-1]), None)


DATA_GONE_LIMIT = 15.0


@functools.cache
def _setpriv() -> str | None:
    return shutil.which("setpriv")


def _dies_with_us(args: list[str]) -> list[str]:
    """``args`` run so that the process dies with the thread that starts it, the campaign
    killed with -9 included: ``setpriv --pdeathsig KILL`` (util-linux) sets
    PR_SET_PDEATHSIG and execs in place (same pid for the watchdogs). An orphaned copy
    would go on writing a temporary name that the next `resume` has already removed."""
    setpriv = _setpriv()
    return [setpriv, "--pdeathsig", "KILL", *args] if setpriv else args


def _control_port(src: str, dst: str) -> int:
    remote = src if scheme_of(src) != "file" else dst
    port = urlsplit(remote).port
    return port or 2811


class _DataWatchdog:
    """globus-url-copy -p N (MODE E) sometimes never returns when the server fails the
    transfer (e.g. ENOSPC): data connections gone, control connection idle, no output.
    Stalled = no data connection for DATA_GONE_LIMIT s (since the start or the last one)."""

    def __init__(self, pid: int, control_port: int) -> None:
        self.pid, self.control_port = pid, control_port
        self.gone_since: float | None = time.monotonic()
        self.next_check = 0.0

    def stalled(self) -> bool:
        now = time.monotonic()
        if now < self.next_check:
            return False
        self.next_check = now + 0.5
        import psutil           # here, not at import: 15-19 ms a campaign need not pay
        try:
            conns = psutil.Process(self.pid).net_connections(kind="tcp")
        except (psutil.Error, OSError):
            return False
        data = [c for c in conns if c.status == psutil.CONN_ESTABLISHED and c.raddr
                and c.raddr.port != self.control_port]
        if data:
            self.gone_since = None
            return False
        if self.gone_since is None:
            self.gone_since = now
        return now - self.gone_since > DATA_GONE_LIMIT


def _side(stderr: str, remote_src: bool) -> str:
    """Which end failed: a local open error names the source when uploading."""
    first = stderr.strip().splitlines()[0] if stderr.strip() else ""
    local_error = first.startswith("error: globus_xio: Unable to open file")
    if remote_src:
        return "destination" if local_error else "source"
    return "source" if local_error else "destination"


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=1)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
