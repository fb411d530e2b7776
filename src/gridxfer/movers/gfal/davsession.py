"""This thread's HTTP session for the requests gridxfer sends itself (``davmove``'s MOVE,
``davhead``'s HEAD and read-back, ``davput``'s GET and PUT): connections kept from one
file to the next, trust and auth as the davs mover's gfal2 (davix) has them.

- urllib3 (``requests``' own transport) without ``requests`` on top: a request costs
  ~0.2 ms of CPU there against ~0.5 ms (loopback XrdHttp, 2,000 HEADs; requests merges
  the session's settings into every request, through typing's slow protocol checks), and
  a small davs file is four or five of them (docs/performance-notes.md, session 36).
- Trust: the system's CAs (OpenSSL's default store, read lazily where ``systemca``
  skipped the file) and ``X509_CERT_DIR`` (default ``/etc/grid-security/certificates``),
  as gfal2; ``REQUESTS_CA_BUNDLE`` and the environment's proxies are not read, as gfal2
  reads neither.
- Auth: the URL's bearer token in an ``Authorization`` header (the caller's, then this
  thread's for the server, ``movers.tokens``, then ``BEARER_TOKEN`` as gfal2 reads it),
  and the X.509 proxy (``X509_USER_PROXY``, else ``/tmp/x509up_u<uid>``) as client
  certificate, as gfal2 presents both: loaded once per session, again when the file
  changes (davix loads it for every request: docs/performance-notes.md, session 35; an
  XrdHttp closes the connection after a 404, and the next request makes a new one). A
  token is never logged, put in an error or in a URL.
"""
from __future__ import annotations

import contextlib
import os
import ssl
import stat
import threading
from dataclasses import dataclass

import urllib3
from urllib3.exceptions import HTTPError, NewConnectionError, TimeoutError as _UrllibTimeout

from gridxfer.movers.tokens import token_for
from gridxfer.movers.x509 import proxy_file, trust_dir

HTTP_SCHEME = {"davs": "https", "https": "https", "dav": "http", "http": "http"}
_local = threading.local()


class NoAnswer(Exception):
    """No HTTP answer: the connection failed or was dropped (the message says how)."""


class Stalled(NoAnswer):
    """No answer within the read timeout (or no connection within the connect one)."""


@dataclass(frozen=True)
class Answer:
    status: int
    reason: str
    headers: urllib3.HTTPHeaderDict
    data: bytes

    def whole(self) -> bytes | None:
        """The body of a ``200`` whose ``Content-Length`` it matches; None otherwise (a
        GET's bytes are taken only whole)."""
        length = self.headers.get("Content-Length", "")
        ok = self.status == 200 and length.isdigit() and int(length) == len(self.data)
        return self.data if ok else None


def request(method: str, url: str, headers: dict, *, body: bytes | None = None,
            timeout: tuple[float, float]) -> Answer:
    """One request on this thread's session (no redirect followed, nothing retried):
    ``url`` in any ``HTTP_SCHEME``; ``timeout`` (connect, read) in seconds. Raises
    ``Stalled`` or ``NoAnswer``."""
    try:
        got = session().request(method, http_url(url), headers=headers, body=body,
                                timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]),
                                redirect=False, retries=False)
    except NewConnectionError as exc:   # refused, unreachable: a ConnectTimeoutError too
        raise NoAnswer(type(exc).__name__) from None
    except _UrllibTimeout as exc:
        raise Stalled(type(exc).__name__) from None
    except (HTTPError, OSError) as exc:
        raise NoAnswer(type(exc).__name__) from None
    return Answer(got.status, got.reason or "", got.headers, got.data)


def session() -> urllib3.PoolManager:
    """This thread's connections (kept for the next request), their SSL context holding
    the system's and the grid's CAs and the X.509 proxy as client certificate where there
    is one. A proxy renewed in place (another mtime or size) makes a new session."""
    stamp = _proxy_stamp()
    current = getattr(_local, "session", None)
    if current is None or _local.stamp != stamp:
        if current is not None:
            current.clear()
        context = ssl.create_default_context()
        grid = trust_dir()
        if os.path.isdir(grid):
            context.load_verify_locations(capath=grid)
        if stamp is not None:       # unreadable, as davix: none sent; the server decides
            with contextlib.suppress(OSError, ssl.SSLError):
                context.load_cert_chain(stamp[0])
        current = urllib3.PoolManager(ssl_context=context, retries=False)
        _local.session, _local.stamp = current, stamp
    return current


def _proxy_stamp() -> tuple[str, int, int] | None:
    """The proxy file, its mtime and size (one stat a request); None where there is none."""
    path = proxy_file()
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (path, st.st_mtime_ns, st.st_size) if stat.S_ISREG(st.st_mode) else None


def auth(url: str, token: str | None) -> dict[str, str]:
    """The headers of a request to ``url``: its bearer token, if any (the session presents
    the proxy either way, as gfal2 does)."""
    bearer = token or token_for(url) or os.environ.get("BEARER_TOKEN")
    return {"Authorization": f"Bearer {bearer}"} if bearer else {}


def http_url(url: str) -> str:
    """``url`` (davs://, https://, dav://, http://) as HTTP spells it."""
    scheme, sep, rest = url.partition("://")
    return f"{HTTP_SCHEME.get(scheme, scheme)}{sep}{rest}"


__all__ = ["HTTP_SCHEME", "Answer", "NoAnswer", "Stalled", "auth", "http_url", "request",
           "session"]
