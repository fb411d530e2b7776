"""One runner per campaign: an exclusive ``flock`` on ``<name>.lock`` beside the journal.

``run``, ``resume`` and ``cancel`` take it BEFORE anything touches the journal (plan,
``--replace``, crash recovery) and hold it until the process ends. A second process gets
``CampaignBusy`` (exit 2) naming the holder's pid, which the holder writes into the lock
file once it has the lock. The kernel drops a flock with its process, so a lock left by
``kill -9`` never blocks the next ``resume``; the lock file itself stays (removing it
while another process waits on it would let two runners in).

``holder(name)`` tells, without taking the lock (a probe would make a starting runner
fail), which live process holds it: the pid in the file, if that process has the lock
file open (``/proc/<pid>/fd``).
"""
from __future__ import annotations

import errno
import fcntl
import os
import time
from pathlib import Path

from gridxfer.errors import UsageError
from gridxfer.campaign.journal import store as journal
from gridxfer.state import shared_mode


class CampaignBusy(UsageError):
    """Another process runs the campaign (exit 2)."""

    def __init__(self, name: str, pid: int | None) -> None:
        self.pid = pid
        who = f"pid {pid}" if pid else "another process"
        super().__init__(f"campaign {name!r} is already being run by {who}; stop it with "
                         f"`gridxfer campaign cancel {name}` or wait for it to end")


def lock_path(name: str) -> Path:
    return journal.journal_path(name).with_suffix(".lock")


class CampaignLock:
    """``with CampaignLock(name):`` holds the campaign's lock (``CampaignBusy`` if taken)."""

    def __init__(self, name: str) -> None:
        self.name, self.path = name, lock_path(name)
        self._fd: int | None = None

    def acquire(self) -> CampaignLock:
        mode = shared_mode(self.path.parent)      # the journal's: readable by its group
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, mode)
        try:
            if os.fstat(fd).st_mode & 0o777 != mode and os.fstat(fd).st_uid == os.getuid():
                os.fchmod(fd, mode)         # the umask, or a lock file from before
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            raise CampaignBusy(self.name, _wait_for_pid(self.path)) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)            # drops the flock; the file stays (module docstring)

    def __enter__(self) -> CampaignLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def holder(name: str) -> int | None:
    """The pid of the live process holding ``name``'s lock, or None."""
    return holder_at(lock_path(name))


def holder_at(path: Path) -> int | None:
    """``holder`` for a lock file given by its path."""
    pid = _read_pid(path)
    return pid if pid is not None and _holds(pid, path) else None


def _read_pid(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _wait_for_pid(path: Path, patience: float = 1.0) -> int | None:
    """The holder writes its pid just after it took the lock: give it ``patience`` s."""
    deadline = time.monotonic() + patience
    while True:
        pid = _read_pid(path)
        if pid is not None and _holds(pid, path):
            return pid
        if time.monotonic() > deadline:
            return pid
        time.sleep(0.01)


def _holds(pid: int, path: Path) -> bool:
    """Does process ``pid`` have the lock file open (then it holds the lock: a process
    that failed to take it closes the file at once)? Another user's process: /proc/locks."""
    try:
        want = os.stat(path)
    except OSError:
        return False
    fd_dir = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except FileNotFoundError:
        return False
    except PermissionError:
        return _in_proc_locks(pid, want.st_ino)
    for fd in fds:
        try:
            st = os.stat(f"{fd_dir}/{fd}")
        except OSError:
            continue
        if (st.st_ino, st.st_dev) == (want.st_ino, want.st_dev):
            return True
    return False


def _in_proc_locks(pid: int, inode: int) -> bool:
    """``/proc/locks`` lists "N: FLOCK ADVISORY WRITE <pid> <maj>:<min>:<inode> ..."."""
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as fh:
            for line in fh:
                f = line.split()
                if len(f) >= 6 and f[1] == "FLOCK" and f[4] == str(pid) \
                        and f[5].rsplit(":", 1)[-1] == str(inode):
                    return True
    except OSError:
        pass
    return False
