"""Third-party GridFTP copies (gsiftp/ftp -> gsiftp/ftp) run in a child process, one per
worker thread, kept between copies.

Why: cancelling a running third-party copy with ``Gfal2Context.cancel()`` is a race inside
gfal2 2.21 that crashes the interpreter now and then (SIGSEGV in ``cancel``, twice in ~60
test runs): with a campaign's Ctrl-C or the watchdog, the whole campaign. Here a cancel
kills the child instead, which cannot take the campaign with it: the GridFTP servers abort
the transfer when its control connections close, and the caller removes the temporary file.

The child keeps its gfal2 context, so its GridFTP sessions (a GSI handshake each) serve every
copy of the thread, as the in-process context did; only a cancelled or crashed child costs a
new one. A child ends when its thread does (stdin closed; and PR_SET_PDEATHSIG: killed with
it, even by kill -9) and at interpreter exit (killed). Protocol: one JSON request per line
on stdin; the child answers with ``{"progress": bytes}`` lines and one ``{"ok": true}`` or
``{"error": {"code", "message"}}``. EOF on stdin ends it.
"""
from __future__ import annotations

import atexit
import collections
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import ProgressFn, TransferParams
from gridxfer.movers.classify import one_line, transfer_error

POLL = 0.2                  # s between looks at the cancel flag


@dataclass(frozen=True)
class AgentError:
    """A gfal2 GError as the child reported it (classify reads .code and .message)."""
    code: int
    message: str


class _Agent:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gridxfer.movers.gfal.agent", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
            start_new_session=True)         # a terminal's Ctrl-C goes to the campaign only
        self.lines: queue.SimpleQueue = queue.SimpleQueue()
        self.stderr: collections.deque[str] = collections.deque(maxlen=20)
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines.put, True),
                         daemon=True, name="gfal-agent-out").start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr.append, False),
                         daemon=True, name="gfal-agent-err").start()
        with _ALL_LOCK:
            _ALL.add(self)

    @staticmethod
    def _pump(stream, put, eof_marker: bool) -> None:
        for line in stream:
            put(line)
        if eof_marker:
            put(None)           # the child is gone

    def __del__(self) -> None:
        # The thread that owned it has ended: closing stdin ends an idle child (EOF).
        with contextlib.suppress(Exception):    # interpreter shutdown or already closed
            stdin = self.proc.stdin
            if stdin is not None:
                stdin.close()

    def kill(self) -> None:
        with _ALL_LOCK:
            _ALL.discard(self)
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def died(self, what: str) -> TransferError:
        self.kill()
        tail = one_line(" ".join(self.stderr), 300)
        return TransferError(ErrorClass.OTHER, f"{what}: gfal2 copy process ended "
                             f"(status {self.proc.returncode}){': ' + tail if tail else ''}")


_ALL: weakref.WeakSet[_Agent] = weakref.WeakSet()   # live children, for exit
_ALL_LOCK = threading.Lock()
_local = threading.local()


@atexit.register
def stop_all() -> None:
    """Kill the live gfal2 children (at exit; the CLI calls it when it skips atexit)."""
    with _ALL_LOCK:
        agents = list(_ALL)
    for agent in agents:
        agent.kill()


def copy(src: str, dst: str, params: TransferParams, progress: ProgressFn | None,
         nbstreams: int, *, http: dict | None = None, stall: float | None = None) -> None:
    """Third-party copy ``src`` -> ``dst`` by this thread's child; TransferError on failure.

    ``http``: an HTTP-TPC (httptpc.py): ``{"mode": "3rd pull" | "3rd push", "creds":
    [[url prefix, token], ...]}``; the tokens reach the child on its stdin only.
    ``stall``: seconds without progress (GridFTP: bytes; HTTP: performance markers) after
    which the child is killed and the copy fails as TIMEOUT (retried by the scheduler)."""
    what = f"{src} -> {dst}"
    if params.cancel is not None and params.cancel.is_set():
        raise TransferError(ErrorClass.CANCELLED, f"{what}: cancelled before start")
    agent = getattr(_local, "agent", None)
    if agent is None or agent.proc.poll() is not None:
        agent = _local.agent = _Agent()
    request = {"src": src, "dst": dst, "nbstreams": nbstreams,
               "timeout": max(1, int(params.timeout)), "tcp_buffer": int(params.tcp_buffer or 0)}
    if http is not None:
        request["http"] = http
    stdin = agent.proc.stdin
    assert stdin is not None                    # stdin=PIPE
    try:
        stdin.write(json.dumps(request) + "\n")
        stdin.flush()
    except OSError:
        _local.agent = None
        raise agent.died(what) from None
    moved, moved_at = -1, time.monotonic()
    while True:
        if params.cancel is not None and params.cancel.is_set():
            _local.agent = None
            agent.kill()
            raise TransferError(ErrorClass.CANCELLED, f"{what}: cancelled")
        if stall is not None and time.monotonic() - moved_at > stall:
            _local.agent = None
            agent.kill()
            raise TransferError(ErrorClass.TIMEOUT, f"{what}: stalled: no progress for "
                                f"{stall:g} s (at {max(moved, 0)} bytes)")
        try:
            line = agent.lines.get(timeout=POLL)
        except queue.Empty:
            continue
        if line is None:
            _local.agent = None
            raise agent.died(what)
        try:
            reply = json.loads(line)
        except ValueError:          # something in the child printed to stdout: keep it as news
            agent.stderr.append(line)
            continue
        if "progress" in reply:
            done = int(reply["progress"])
            if done > moved:
                moved, moved_at = done, time.monotonic()
            if progress is not None:
                progress(done, None)
        elif reply.get("ok"):
            return
        else:
            err = reply.get("error") or {}
            message = str(err.get("message", ""))
            side = "source" if "SOURCE" in message.upper()[:80] else "destination"
            raise transfer_error(AgentError(int(err.get("code") or 0), message), what, side=side)


# ------------------------------------------------------------------ the child
def _die_with_parent(parent: str | None) -> None:
    """SIGKILL this child when the thread that started it ends, the campaign killed with
    -9 included (Linux PR_SET_PDEATHSIG): an orphaned copy would go on writing a
    temporary name that the next `resume` has already removed."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)      # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if parent and parent.isdigit() and os.getppid() != int(parent):
        os._exit(1)                 # the parent died before the request took effect


def main() -> int:
    _die_with_parent(sys.argv[1] if len(sys.argv) > 1 else None)
    import gfal2

    from gridxfer.movers.gfal.mover import context, copy_parameters

    ctx = context()                 # one context, sessions reused across requests
    lock = threading.Lock()

    def emit(obj: dict) -> None:
        with lock:
            sys.stdout.write(json.dumps(obj) + "\n")
            sys.stdout.flush()

    for line in sys.stdin:
        req = json.loads(line)
        http = req.get("http")
        if http is not None:            # HTTP-TPC: this request's mode and tokens only
            ctx.cred_clean()
            for prefix, token in http.get("creds", []):
                ctx.cred_set(prefix, ctx.cred_new("BEARER", token))
            ctx.set_opt_string("HTTP PLUGIN", "DEFAULT_COPY_MODE", http["mode"])
            ctx.set_opt_boolean("HTTP PLUGIN", "ENABLE_STREAM_COPY", False)
            ctx.set_opt_boolean("HTTP PLUGIN", "ENABLE_FALLBACK_TPC_COPY", False)
            ctx.set_opt_boolean("HTTP PLUGIN", "RETRIEVE_BEARER_TOKEN", False)
            # no X.509 delegation: XrdHttpTPC refuses gfal2's "Credential: gridsite", which
            # gfal2 sends when the remote side has no token (an anonymous server)
            ctx.set_opt_string_list("HTTP PLUGIN", "HEADERS", ["Credential: none"])
        tp = copy_parameters(ctx, timeout=req["timeout"], nbstreams=int(req["nbstreams"]),
                             tcp_buffer=req.get("tcp_buffer"),
                             progress=lambda done, _total: emit({"progress": done}))
        try:
            ctx.filecopy(tp, req["src"], req["dst"])
            emit({"ok": True})
        except gfal2.GError as exc:
            emit({"error": {"code": exc.code, "message": exc.message}})
        finally:
            if http is not None:
                ctx.cred_clean()
    return 0


if __name__ == "__main__":
    sys.exit(main())
