"""This thread's HTTP session for the WebDAV requests gridxfer sends itself (``davmove``'s
MOVE, ``davhead``'s HEAD): connections kept from one file to the next, trust and auth as
the davs mover's gfal2 (davix) has them.

- Trust: the system's CAs (OpenSSL's default store, read lazily where ``systemca``
  skipped the file) and ``X509_CERT_DIR`` (default ``/etc/grid-security/certificates``),
  as gfal2; ``REQUESTS_CA_BUNDLE`` and the environment's proxies are not read
  (``trust_env`` off), as gfal2 reads neither.
- Auth: the URL's bearer token in an ``Authorization`` header (the caller's, then this
  thread's for the server, ``movers.tokens``, then ``BEARER_TOKEN`` as gfal2 reads it),
  and the X.509 proxy (``X509_USER_PROXY``, else ``/tmp/x509up_u<uid>``) as client
  certificate, as gfal2 presents both: loaded once per session, again when the file
  changes (davix loads it for every request, and ``requests`` for every connection; an
  XrdHttp closes the connection after a 404: docs/performance-notes.md, session 35). A
  token is never logged, put in an error or in a URL.
"""
from __future__ import annotations

import contextlib
import os
import ssl
import stat
import threading
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from gridxfer.movers.tokens import token_for
from gridxfer.movers.x509 import proxy_file, trust_dir

HTTP_SCHEME = {"davs": "https", "https": "https", "dav": "http", "http": "http"}
_local = threading.local()


class _Adapter(HTTPAdapter):
    """Connections made with one SSL context: the system's CAs (the caller adds the grid's
    as ``verify``, a capath read lazily)."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self._context = context
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["ssl_context"] = self._context
        super().init_poolmanager(*args, **kwargs)


def session() -> requests.Session:
    """This thread's session (its TLS connections kept for the next request), its SSL
    context holding the X.509 proxy as client certificate where there is one. A proxy
    renewed in place (another mtime or size) makes a new session."""
    stamp = _proxy_stamp()
    current = getattr(_local, "session", None)
    if current is None or _local.stamp != stamp:
        if current is not None:
            current.close()
        context = ssl.create_default_context()
        if stamp is not None:       # unreadable, as davix: none sent; the server decides
            with contextlib.suppress(OSError, ssl.SSLError):
                context.load_cert_chain(stamp[0])
        current = requests.Session()
        current.trust_env = False
        current.mount("https://", _Adapter(context))
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


def capath() -> str | bool:
    """``verify`` for requests: the grid's CA directory where it exists, else True."""
    path = trust_dir()
    return path if os.path.isdir(path) else True


def auth(url: str, token: str | None) -> dict[str, str | bytes]:
    """The headers of a request to ``url``: its bearer token, if any (the session presents
    the proxy either way, as gfal2 does)."""
    bearer = token or token_for(url) or os.environ.get("BEARER_TOKEN")
    return {"Authorization": f"Bearer {bearer}"} if bearer else {}


def http_url(url: str) -> str:
    """``url`` (davs://, https://, dav://, http://) as requests reads it."""
    scheme, sep, rest = url.partition("://")
    return f"{HTTP_SCHEME.get(scheme, scheme)}{sep}{rest}"


__all__ = ["HTTP_SCHEME", "auth", "capath", "http_url", "session"]
