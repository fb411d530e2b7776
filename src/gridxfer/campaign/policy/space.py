"""Free space of destination endpoints, polled in the background: ``SpaceWatcher``.

``query_free(url) -> int | None`` asks the storage itself:

- ``root://``: XRootD ``query space`` (``oss.free`` of the space holding the path),
  asked of the nearest existing directory (a path that does not exist yet gets a
  meaningless answer);
- ``file://``: ``statvfs``;
- any other scheme: the metadata mover's ``space(url) -> (free, total)`` when it
  has a ``space`` method (``capabilities_of``); otherwise unknown (None).

The watcher keeps one daemon thread per watched URL (a dead server can take seconds to
time out, and must not hold up the others or the dispatcher), polls every ``period``
seconds (or at once after ``refresh(url)``, but never more often than every
``min_interval`` s), and stops a URL's thread when nobody has asked about it for
``idle_stop`` seconds. ``DefaultExclusions`` uses it to skip full endpoints before
writing to them.

A campaign with bearer tokens gives the watcher ``tokens`` (``Credentials.by_host``: host:port
-> token, read again for every query, so a renewed token is used): each query runs inside
``movers.tokens.using_hosts``, and XRootD's stat and ``query space`` carry the endpoint's
token as ``authz`` CGI, as its copies do (a token-protected xrootd answered them "not
authorised": free space unknown, a full endpoint never excluded before its writes failed).

GridFTP (gsiftp/ftp) is first asked ``SESSION_PROBE_DELAY`` s after the watch starts. Its
query runs on a control session of its own (the watcher's thread has no other): a GSI
handshake that costs the server 0.2-0.4 s of CPU (measured on loopback), at the very
moment the workers' own handshakes hold up the campaign's first bytes; and Globus
servers answer "500 Invalid command" anyway. Until the first reading the free space is
unknown, which excludes nothing: a full endpoint still fails its writes with NO_SPACE.
"""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from urllib.parse import unquote, urlsplit

from gridxfer.movers.routes import GRIDFTP
from gridxfer.movers.tokens import using_hosts
from gridxfer.movers.urls import scheme_of

Probe = Callable[[str], "int | None"]
Tokens = Callable[[], "dict[str, str]"]       # host:port -> bearer token, read per query
SESSION_PROBE_DELAY = 10.0      # s before the first space query that needs its own GSI session


def first_probe_delay(url: str) -> float:
    """Seconds to wait before the first space query of ``url`` (module docstring)."""
    return SESSION_PROBE_DELAY if scheme_of(url) in GRIDFTP else 0.0


def _xrootd_free(url: str) -> int | None:
    from gridxfer.movers.xrootd.env import client     # XrdCl defaults before its first channel
    from XRootD.client.flags import QueryCode

    parts = urlsplit(url)
    path = unquote(parts.path)
    path = "/" + path.lstrip("/")
    from gridxfer.movers.xrootd.authz import with_cgi      # this thread's token, if any

    fs = client.FileSystem(f"{parts.scheme}://{parts.netloc}")
    while path not in ("", "/"):
        # XRootD answers "query space" for a path that does not exist with garbage
        # (0 of 0, or 0 free of the whole space): ask the nearest existing directory
        status, _ = fs.stat(with_cgi(path, url), timeout=5)
        if not status.ok:
            if status.errno not in (3011, 2):           # kXR_NotFound / ENOENT
                return None
            path = path.rstrip("/").rsplit("/", 1)[0]
            continue
        status, reply = fs.query(QueryCode.SPACE, with_cgi(path.rstrip("/") + "/", url),
                                 timeout=5)
        if not status.ok or reply is None:
            return None
        fields = dict(kv.partition("=")[::2] for kv in
                      reply.decode(errors="replace").strip("\x00 \n").split("&"))
        try:
            total, free = int(fields.get("oss.space", 0)), int(fields.get("oss.free", 0))
        except ValueError:
            return None
        return free if total > 0 else None
    return None


def query_free(url: str) -> int | None:
    """Free bytes at ``url`` as the storage reports them; None when unknown."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    try:
        if scheme in ("root", "xroot"):
            return _xrootd_free(url)
        if scheme == "file":
            path = unquote(urlsplit(url).path)
            while path and not os.path.exists(path):
                path = os.path.dirname(path.rstrip("/"))
            st = os.statvfs(path or "/")
            return st.f_bavail * st.f_frsize
        if not scheme:
            return None
        from gridxfer.movers.capabilities import capabilities_of
        from gridxfer.movers.registry import mover_for
        space = capabilities_of(mover_for(url)).space
        if space is not None:
            return int(space(url)[0])
    except Exception:           # unknown is fine: the NO_SPACE error path still works
        return None
    return None


def watchable(url: str) -> bool:
    return "://" in url


class SpaceWatcher:
    def __init__(self, probe: Probe = query_free, *, period: float = 2.0,
                 idle_stop: float = 30.0, min_interval: float = 0.25,
                 first_delay: Callable[[str], float] = first_probe_delay,
                 tokens: Tokens | None = None) -> None:
        self.probe, self.period, self.idle_stop = probe, period, idle_stop
        self.tokens = tokens
        self.first_delay = first_delay
        self.min_interval = min_interval    # refresh() never polls faster than this
        self._free: dict[str, tuple[int, int | None]] = {}      # url -> (reading no., free)
        self._wake: dict[str, threading.Event] = {}
        self._seq = 0
        self._asked: dict[str, float] = {}
        self._threads: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def watch(self, urls: Iterable[str]) -> None:
        now = time.monotonic()
        with self._lock:
            for url in urls:
                if not watchable(url):
                    continue
                self._asked[url] = now
                th = self._threads.get(url)
                if th is None or not th.is_alive():
                    th = threading.Thread(target=self._loop, args=(url,), daemon=True,
                                          name=f"gridxfer-space-{len(self._threads)}")
                    self._threads[url] = th
                    th.start()

    def free(self, url: str) -> int | None:
        """The latest free bytes of ``url`` (None: not known yet, or not knowable)."""
        return self.reading(url)[1]

    def reading(self, url: str) -> tuple[int, int | None]:
        """(reading number, free bytes): the number changes with every new reading."""
        with self._lock:
            self._asked[url] = time.monotonic()
            return self._free.get(url, (0, None))

    def refresh(self, url: str) -> None:
        """Poll ``url`` now (e.g. a write there just ended) instead of at the next period."""
        with self._lock:
            ev = self._wake.get(url)
        if ev is not None and not ev.is_set():
            ev.set()

    def close(self, timeout: float = 5.0) -> None:
        """Stop polling and wait (up to ``timeout`` s) for the threads: a thread still
        inside gfal2 / XrdCl when the interpreter exits aborts the process (SIGABRT,
        "terminate called without an active exception", seen in gsiftp campaigns)."""
        self._stop.set()
        with self._lock:
            for ev in self._wake.values():
                ev.set()
            threads = list(self._threads.values())
        deadline = time.monotonic() + timeout
        for th in threads:
            if th is not threading.current_thread():
                th.join(max(0.0, deadline - time.monotonic()))

    def _ask(self, url: str) -> int | None:
        """One query, with the campaign's tokens where it has some."""
        if self.tokens is None:
            return self.probe(url)
        try:
            hosts = self.tokens()
        except Exception:           # a token that cannot be read: asked without, as before
            hosts = {}
        with using_hosts(hosts):
            return self.probe(url)

    def _loop(self, url: str) -> None:
        with self._lock:
            wake = self._wake.setdefault(url, threading.Event())
        if self._stop.wait(self.first_delay(url)):     # not cut short by refresh()
            return
        while not self._stop.is_set():
            with self._lock:
                if time.monotonic() - self._asked.get(url, 0.0) > self.idle_stop:
                    self._threads.pop(url, None)
                    return
            wake.clear()
            value = self._ask(url)
            with self._lock:
                self._seq += 1
                self._free[url] = (self._seq, value)
            if self._stop.wait(self.min_interval):
                return
            wake.wait(max(0.0, self.period - self.min_interval))
