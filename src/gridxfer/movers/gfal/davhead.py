"""One ``HEAD`` on this thread's ``davsession``: the size of a file a copy just wrote and,
asked in the same request, its adler32 (``Want-Digest``, RFC 3230), or whether a name is
there at all.

Why own code (docs/performance-notes.md, session 35): through gfal2 every request costs
davix a new session configuration and a fresh load of the X.509 proxy (its private key
through OpenSSL 3's decoders: 54 % of a small-file campaign's CPU); a small davs file
took four such requests. Here the connection, its TLS session and the client
certificate are kept, and the size and the digest come in one round trip.

Only plain answers are read: ``200`` with ``Content-Length`` (and ``Digest`` when asked)
and ``404``. Anything else (a redirect, a refusal, a server error, no answer) is None, and
the caller asks gfal2 as before, whose errors and retries stay the one classification.
"""
from __future__ import annotations

from dataclasses import dataclass

import requests

from gridxfer.movers.gfal import davsession

HEAD_TIMEOUT = (30.0, 300.0)        # s: connect, then the answer (a digest of a big file)


@dataclass(frozen=True)
class Head:
    """What a ``HEAD`` answered: ``found`` False for 404; ``size`` and ``adler32`` (8
    lowercase hex digits, None where not asked or not sent) for a file."""
    found: bool
    size: int = 0
    adler32: str | None = None


def head(url: str, token: str | None, *, digest: bool = False) -> Head | None:
    """``HEAD url`` (``Want-Digest: adler32`` with ``digest``); None: ask gfal2."""
    headers = davsession.auth(url, token)
    if digest:
        headers = {**headers, "Want-Digest": "adler32"}
    try:
        answer = davsession.session().head(
            davsession.http_url(url), headers=headers,
            verify=davsession.capath(), timeout=HEAD_TIMEOUT, allow_redirects=False)
    except requests.RequestException:
        return None
    if answer.status_code == 404:
        return Head(False)
    length = answer.headers.get("Content-Length", "")
    if answer.status_code != 200 or not length.isdigit():
        return None
    return Head(True, int(length), adler32_of(answer.headers.get("Digest", "")))


def adler32_of(header: str) -> str | None:
    """The adler32 of a ``Digest`` header (``adler32=0a1b2c3d``, among others), zero-padded;
    None if it holds none."""
    for item in header.split(","):
        name, _, value = item.strip().partition("=")
        value = value.strip().lower()
        if name.strip().lower() == "adler32" and value and len(value) <= 8 \
                and all(c in "0123456789abcdef" for c in value):
            return value.zfill(8)
    return None


__all__ = ["HEAD_TIMEOUT", "Head", "adler32_of", "head"]
