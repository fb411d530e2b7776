"""globus-url-copy mover for file <-> gsiftp/ftp with real parallel streams (one process
per file). One of the three implementations the GridFTP route (movers/gridftp/mover.py)
chooses among: the one for ``streams`` > 1, or for every copy with GRIDXFER_GUC_ALWAYS=1.

gfal2 copies file<->gsiftp as a single-stream "streamed" copy; ``globus-url-copy -p N``
uses MODE E with N data connections, and ``-tcp-bs`` sets the per-stream buffer.
Credentials come from the usual X509_* environment (X509_USER_PROXY, X509_CERT_DIR),
inherited by the child. Remote metadata (stat, checksum, rename) goes through
movers/gridftp/ops.py (gridxfer's own client, gfal2 where it cannot be used).
"""
from __future__ import annotations

import functools
import io
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from urllib.parse import urlsplit

from gridxfer.errors import ErrorClass, TransferError, UsageError
from gridxfer.movers import routes, toolurls
from gridxfer.movers.base import ProgressFn, TransferOutcome, TransferParams
from gridxfer.movers.classify import one_line, transfer_error
from gridxfer.movers.gridftp.ops import GridFTPMetadata, check_local_pair
from gridxfer.movers.urls import scheme_of
from gridxfer.redact import credential_in_url, redact
import contextlib

_BYTES = re.compile(rb"(\d+) bytes")


def _gx_url(url: str) -> str:
    """globus-url-copy wants file:///abs/path for local files, percent-encoded: it decodes
    them (a local 'a%2fb' would be read as 'a/b'). gsiftp:// URLs are already encoded."""
    return toolurls.tool_url(url) if scheme_of(url) == "file" else url


def command(src: str, dst: str, params: TransferParams) -> list[str]:
    """The globus-url-copy argument list for one transfer (no shell)."""
    args = ["globus-url-copy", "-vb", "-cd", "-p", str(max(1, int(params.streams)))]
    if params.tcp_buffer:
        args += ["-tcp-bs", str(int(params.tcp_buffer))]
    stall = int(min(params.timeout, 600))
    args += ["-stall-timeout", str(max(stall, 1)), _gx_url(src), _gx_url(dst)]
    return args


class GlobusUrlCopyMover(GridFTPMetadata):
    name = "globus-url-copy"
    schemes, pairs, tpc_pairs = routes.GUC.schemes, routes.GUC.pairs, routes.GUC.tpc_pairs

    def __init__(self, binary: str = "globus-url-copy") -> None:
        super().__init__()
        self.binary = binary

    def _require_binary(self) -> None:
        if shutil.which(self.binary) is None:
            raise UsageError(f"{self.binary} not found (install globus-gass-copy-progs)")

    def copy(self, src: str, dst: str, *, params: TransferParams,
             progress: ProgressFn | None = None) -> TransferOutcome:
        check_local_pair(self, src, dst, params)
        self._require_binary()
        return self.verified(src, dst, params, progress)

    def raw_copy(self, src: str, dst: str, params: TransferParams,
                 progress: ProgressFn | None = None) -> tuple[int, str]:
        """Move the bytes only (no verification, no temp name): (streams used, mode).
        ``globus-url-copy -p N`` (MODE E), one process per file."""
        self._require_binary()
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
        errors: list[bytes] = []
        stderr_pipe = proc.stderr
        assert stderr_pipe is not None             # stderr=PIPE
        err_reader = threading.Thread(target=lambda: errors.append(stderr_pipe.read()), daemon=True)
        err_reader.start()
        out_reader = threading.Thread(target=self._read_progress, args=(proc, progress),
                                      daemon=True)
        out_reader.start()
        deadline = time.monotonic() + params.timeout
        watchdog = _DataWatchdog(proc.pid, _control_port(args[-2], args[-1]))
        reason: ErrorClass | None = None
        why = ""
        while proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.25)
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
    def _read_progress(proc: subprocess.Popen[bytes], progress: ProgressFn | None) -> None:
        buf = b""
        out = proc.stdout
        assert isinstance(out, io.BufferedReader)   # stdout=PIPE, unbuffered=False
        while chunk := out.read1(4096):
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
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
