"""Starting, watching and killing the testbed's server processes.

Every server runs in its own session/process group, with stdout+stderr in
``<run_dir>/<name>.out`` and a pidfile ``<run_dir>/<name>.gxpid`` (JSON: pid, create_time,
argv) written right after the spawn, so that ``down`` finds it even if the process that
ran ``up`` was killed -9 before it wrote the inventory.

API::

    free_port(bind="127.0.0.1") -> int
    spawn(name, argv, run_dir, *, env=None, wrap=(), cwd=None) -> Proc
    wait_ready(proc, probe, *, timeout=20.0, what="")     # raises TestbedError + log tail
    terminate(pidfile_procs(d) + matching_procs(m))        # SIGTERM, then SIGKILL; pids
    log_tail(path, lines=15) -> str
    stop_popen(popen, grace=5.0)                           # SIGTERM, then SIGKILL; reaped

``wrap`` is a command prefix (e.g. ``["ip", "netns", "exec", "gx-t1a-se01"]``) that must
``exec`` the rest of the command line, so the recorded pid is the server's.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from gridxfer.testbed.inventory import TestbedError


@dataclass(frozen=True)
class Proc:
    name: str
    pid: int
    create_time: float
    argv: tuple[str, ...]
    out: str          # stdout/stderr file
    pidfile: str


def free_port(bind: str = "127.0.0.1") -> int:
    """A TCP port that is free right now on ``bind`` (found with bind(0))."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((bind, 0))
        return int(sock.getsockname()[1])


def spawn(name: str, argv: Sequence[str], run_dir: Path, *, env: Mapping[str, str] | None = None,
          wrap: Sequence[str] = (), cwd: Path | None = None) -> Proc:
    """Start ``wrap + argv`` in a new session; output to ``run_dir/name.out``; pidfile."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    out = run_dir / f"{name}.out"
    full = [*wrap, *argv]
    with open(out, "ab") as fh:
        try:
            popen = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=fh,
                                     stderr=subprocess.STDOUT,
                                     env=dict(env) if env is not None else None, cwd=cwd,
                                     start_new_session=True, close_fds=True)
        except OSError as exc:
            raise TestbedError(f"cannot start {name} ({full[0]}): {exc}") from exc
    try:
        ctime = psutil.Process(popen.pid).create_time()
    except psutil.Error:
        ctime = 0.0
    pidfile = run_dir / f"{name}{PIDFILE_SUFFIX}"
    pidfile.write_text(json.dumps({"pid": popen.pid, "create_time": ctime, "argv": full}) + "\n")
    # The Popen object is dropped on purpose: servers outlive this process. Reap it
    # if it exits while we are still alive, so it does not linger as a zombie.
    _ZOMBIE_GUARD.append(popen)
    return Proc(name=name, pid=popen.pid, create_time=ctime, argv=tuple(full), out=str(out),
                pidfile=str(pidfile))


_ZOMBIE_GUARD: list[subprocess.Popen] = []
PIDFILE_SUFFIX = ".gxpid"    # not ".pid": servers write their own <name>.pid files


def listens(pid: int, port: int) -> bool:
    """True if process ``pid`` itself has a listening TCP socket on ``port`` (same netns only)."""
    try:
        conns = psutil.Process(pid).net_connections(kind="tcp")
    except psutil.Error:
        return False
    return any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in conns)


def alive(pid: int, create_time: float | None = None) -> bool:
    """True if ``pid`` runs (and is not a zombie), and is the same process if ctime given."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return create_time in (None, 0.0) or abs(proc.create_time() - create_time) < 0.05
    except psutil.Error:
        return False


def wait_ready(proc: Proc, probe: Callable[[], bool], *, timeout: float = 20.0, what: str = "",
               log: str | None = None) -> None:
    """Poll ``probe()`` until True; TestbedError with the log tail if the server dies/times out."""
    deadline = time.monotonic() + timeout
    while True:
        for p in _ZOMBIE_GUARD:
            p.poll()
        if not alive(proc.pid):
            raise TestbedError(f"{what or proc.name} exited during start-up; "
                               f"{_tails(proc, log)}")
        try:
            if probe():
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TestbedError(
                f"{what or proc.name} not ready after {timeout:.0f}s; {_tails(proc, log)}"
            )
        time.sleep(0.1)


def _tails(proc: Proc, log: str | None) -> str:
    parts = [f"output ({proc.out}): {log_tail(proc.out)!r}"]
    if log:
        parts.append(f"log ({log}): {log_tail(log)!r}")
    return "; ".join(parts)


def log_tail(path: str | os.PathLike, lines: int = 15) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 8192))
            text = fh.read().decode(errors="replace")
    except OSError:
        return ""
    return " | ".join(line for line in text.splitlines()[-lines:] if line.strip())


def tree(pid: int, create_time: float | None = None) -> list[psutil.Process]:
    """The process, its descendants and (if it leads one) its whole process group."""
    if not alive(pid, create_time):
        return []
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
        pgid = os.getpgid(pid)
    except (psutil.Error, ProcessLookupError):
        return []
    if pgid == pid:      # it leads its own group (start_new_session): take the group too
        procs += [p for p in psutil.process_iter() if _pgid(p.pid) == pgid and p not in procs]
    return procs


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def terminate(procs: list[psutil.Process], grace: float = 1.5) -> list[int]:
    """SIGTERM all, SIGKILL what is left after ``grace`` seconds; returns the pids.

    A zombie counts as gone: servers whose ``up`` process died are re-parented to init,
    which may reap them late (psutil.wait_procs would wait for that)."""
    procs = list(dict.fromkeys(procs))
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, max(grace, 5.0))):
        for p in procs:
            with contextlib.suppress(psutil.Error):
                p.send_signal(sig)
        if _wait_gone(procs, wait):
            break
    for child in _ZOMBIE_GUARD:
        child.poll()
    return [p.pid for p in procs]


def _wait_gone(procs: list[psutil.Process], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        for p in _ZOMBIE_GUARD:
            p.poll()
        if not any(_running(p) for p in procs):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def _running(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def read_pidfiles(directory: Path) -> list[dict]:
    """Every pidfile (JSON, ``*.gxpid``) below ``directory``."""
    found = []
    for path in sorted(Path(directory).rglob(f"*{PIDFILE_SUFFIX}")):
        try:
            obj = json.loads(path.read_text())
            if isinstance(obj, dict) and "pid" in obj:
                found.append(obj)
        except (OSError, ValueError):
            continue
    return found


def pidfile_procs(directory: Path) -> list[psutil.Process]:
    """Every live process (with its tree) recorded in a pidfile below ``directory``."""
    found: list[psutil.Process] = []
    for obj in read_pidfiles(directory):
        found += tree(int(obj["pid"]), obj.get("create_time"))
    return found


def matching_procs(marker: str) -> list[psutil.Process]:
    """Every process (not us) whose command line mentions ``marker`` (a unique testbed path)."""
    me = os.getpid()
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if p.pid != me and any(marker in arg for arg in (p.info["cmdline"] or ())):
                found.append(p)
        except psutil.Error:
            continue
    return found


def stop_popen(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """Stop a child started here with Popen: SIGTERM, SIGKILL if it has not exited after
    ``grace`` seconds, reaped either way."""
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_quiet(argv: Sequence[str], *, env: Mapping[str, str] | None = None,
              timeout: float = 10.0) -> subprocess.CompletedProcess:
    """Run a short helper command, capturing output (never raises on a non-zero exit)."""
    try:
        return subprocess.run(list(argv), env=dict(env) if env is not None else None,
                              timeout=timeout,
                              capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(list(argv), 255, "", str(exc))
