"""The bearer tokens of what this thread is doing now, by server (host:port), for the
movers' metadata operations and copies that have no ``TransferParams`` (``stat``,
``listdir``, ``checksum``...): ``using`` sets them for a block, ``token_for`` reads them.
A campaign plans its source listing inside ``using`` with the source's token; the XRootD
mover sets each copy's pair (``movers.xrootd.authz``). Nothing here logs or shows a token.

API::

    with using(TokenPair(src=tok), "root://se.example//data/", ""):
        mover.listdir("root://se.example//data/")      # asks token_for(url)
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

from gridxfer.movers.base import TokenPair

_local = threading.local()


def host_of(url: str) -> str:
    """host:port of a URL, without a login name (XRootD channels differ by login name,
    tokens do not)."""
    if "://" not in url:
        return ""
    netloc = url.split("://", 1)[1].split("/", 1)[0]
    return netloc.rpartition("@")[2].lower()


def using(tokens: TokenPair | None, src: str, dst: str
          ) -> AbstractContextManager[dict[str, str]]:
    """Within the block, this thread's requests to ``src``'s and ``dst``'s servers carry
    their side's token (an empty URL: none for that side). No token, and none set around
    it: nothing to set or hide (a plain block: a copy of a small file enters three)."""
    if plain(tokens):
        return nullcontext({})
    return _using(tokens, src, dst)


def plain(tokens: TokenPair | None) -> bool:
    """No token to set, and none set around: a block of ``using`` would change nothing."""
    return tokens is None and not getattr(_local, "tokens", None)


@contextmanager
def _using(tokens: TokenPair | None, src: str, dst: str) -> Iterator[dict[str, str]]:
    by_host: dict[str, str] = {}
    if tokens is not None:
        for url, tok in ((src, tokens.src), (dst, tokens.dst)):
            if tok and url and not url.startswith("file:"):
                by_host[host_of(url)] = tok
    before = getattr(_local, "tokens", None)
    _local.tokens = by_host
    try:
        yield by_host
    finally:
        _local.tokens = before


@contextmanager
def using_hosts(by_host: dict[str, str]) -> Iterator[dict[str, str]]:
    """``using`` for any number of servers (host:port -> token): a resume's clean-up."""
    before = getattr(_local, "tokens", None)
    _local.tokens = dict(by_host)
    try:
        yield _local.tokens
    finally:
        _local.tokens = before


def token_for(url: str) -> str | None:
    """This thread's token for ``url``'s server, if any."""
    tokens: dict[str, str] | None = getattr(_local, "tokens", None)
    if not tokens or url.startswith("file:"):
        return None
    return tokens.get(host_of(url))
