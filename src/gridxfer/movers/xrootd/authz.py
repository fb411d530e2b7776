"""Bearer tokens for root:// (XRootD's ztn login and its SciTokens authorisation), kept out
of every process's arguments and of other processes' environments.

Two places take a token, checked on XRootD 5.5.3 (``tests/integration/test_campaign_tokens``):

- **each request**: XrdAccSciTokens reads the token from the request's ``authz`` CGI before
  it falls back on the ztn login's, so every path XrdCl sends during a copy carries the
  copy's own token (``xpath``/``xurl``; the mover sets them per thread with ``bearer``).
  A token refreshed mid-campaign is therefore used by the next request, and two endpoints
  with different tokens work in one process. The CGI goes only into what XrdCl sends:
  messages name the plain URL (and ``redact`` masks ``authz=`` anyway).
- **the ztn login** of a new connection: XrdCl's ztn reads ``BEARER_TOKEN``,
  ``BEARER_TOKEN_FILE``, ``$XDG_RUNTIME_DIR/bt_u<uid>``, ``/tmp/bt_u<uid>`` from the
  environment when it logs in. Unless the user set ``BEARER_TOKEN`` or
  ``BEARER_TOKEN_FILE``, ``login_token`` writes the newest token to a 0600 file in a
  private 0700 directory and points this process's ``BEARER_TOKEN_FILE`` at it (set once:
  only the file's content changes after that, by an atomic rename). Children inherit the
  path, never the token. Requests made outside a copy (a resume's clean-up, the space
  watcher) are authorised by that login token.
"""
from __future__ import annotations

import atexit
import contextlib
import glob
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from urllib.parse import quote

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import TokenPair
from gridxfer.movers.tokens import plain, token_for, using
from gridxfer.movers.urls import url_path

_lock = threading.Lock()
PREFIX = "gridxfer-bt-"             # + pid: the private directory of one process's login token
_login: dict[str, str] = {}         # "dir", "file", "token": the private login token file


def bearer(tokens: TokenPair | None, src: str, dst: str) -> AbstractContextManager[None]:
    """Within the block, this thread's requests to ``src``'s and ``dst``'s servers carry
    their side's token (``movers.tokens.using``); the ztn login token follows. No token
    anywhere: a plain block (a small file's copy enters two)."""
    return nullcontext() if plain(tokens) else _bearer(tokens, src, dst)


@contextmanager
def _bearer(tokens: TokenPair | None, src: str, dst: str) -> Iterator[None]:
    with using(tokens, src, dst) as by_host:
        if by_host and tokens is not None:
            login_token(tokens.dst or tokens.src or "")
        yield


def _cgi(url: str) -> str:
    if "://" not in url or url.startswith("file:"):
        return ""
    tok = token_for(url)
    if not tok:
        return ""
    if "token" not in _login:
        login_token(tok)    # a request outside a copy (a listing): its token logs in
    return f"authz={quote('Bearer ' + tok, safe='')}"


def xpath(url: str) -> str:
    """The path XrdCl sends for ``url`` (``url_path``), with this thread's token for its
    server as ``authz`` CGI."""
    return with_cgi(url_path(url), url)


def with_cgi(path: str, url: str) -> str:
    """``path`` (of ``url``) with this thread's token for ``url``'s server as CGI."""
    cgi = _cgi(url)
    return f"{path}{'&' if '?' in path else '?'}{cgi}" if cgi else path


def xurl(url: str) -> str:
    """``url`` with this thread's token for its server as ``authz`` CGI."""
    cgi = _cgi(url)
    return f"{url}{'&' if '?' in url else '?'}{cgi}" if cgi else url


def login_token(token: str) -> None:
    """Keep the ztn login token file current (see the module's docstring)."""
    if not token:
        return
    with _lock:
        if _login.get("token") == token:
            return
        if "file" not in _login:
            if os.environ.get("BEARER_TOKEN") or os.environ.get("BEARER_TOKEN_FILE"):
                _login["token"] = token         # the user's own discovery wins the login
                return
            _sweep_stale()
            directory = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")       # 0700
            _login["dir"], _login["file"] = directory, os.path.join(directory, "bt")
            atexit.register(forget)
            _write(_login["file"], token)
            os.environ["BEARER_TOKEN_FILE"] = _login["file"]          # once, by this process
        else:
            with contextlib.suppress(OSError):      # removed under us: the old login stays
                _write(_login["file"], token)
        _login["token"] = token


def forget() -> None:
    """Remove the login token file and its directory (at exit; ``cli.main.leave`` calls it
    too, as its ``os._exit`` skips atexit)."""
    directory = _login.get("dir")
    if directory:
        shutil.rmtree(directory, ignore_errors=True)


def _sweep_stale() -> None:
    """Remove the login directories of gridxfer processes that are gone (kill -9)."""
    for path in glob.glob(os.path.join(tempfile.gettempdir(), f"{PREFIX}*")):
        pid = os.path.basename(path)[len(PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            if os.stat(path).st_uid != os.geteuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue


def _write(path: str, token: str) -> None:
    tmp = f"{path}.{os.getpid()}.new"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    os.replace(tmp, path)


def as_auth(exc: TransferError, tokens: TokenPair | None) -> TransferError:
    """A refused request as class ``auth`` (never retried): a permission error of a copy
    that carried a token (its scope did not do: XRootD's 3010), or an authentication
    failure (XrdCl's "Auth failed": no credential the server takes, the 401 of XRootD)."""
    text = str(exc)
    body = text.split(": ", 1)[1] if text.startswith(f"{exc.error_class.value}: ") else text
    if exc.error_class is not ErrorClass.PERMISSION:
        return exc
    has_token = tokens is not None and bool(tokens.src or tokens.dst)
    if "Auth failed" in body and not has_token:
        return TransferError(ErrorClass.AUTH, f"{body} (no bearer token or proxy the server "
                                              f"takes: give this side a token: source)")
    if has_token or "Auth failed" in body:
        return TransferError(ErrorClass.AUTH, f"{body} (the server refused the bearer token)")
    return exc
