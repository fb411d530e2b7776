"""One ``HEAD`` on this thread's ``davsession``: the size of a file a copy just wrote and,
asked in the same request, its adler32 (``Want-Digest``, RFC 3230), or whether a name is
there at all; for a file of at most ``READ_BACK_MAX`` one ``GET`` instead, the adler32 of
the bytes read back (``read_back``), as root's relay reads a small file back; for a copy's
source one ``PROPFIND`` (``propstat``), whose answer also tells a directory (a HEAD on
XrdHttp answers a directory's size as a file's).

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

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from gridxfer.movers.adler import adler32
from gridxfer.movers.base import normalise_adler32
from gridxfer.movers.gfal import davsession, digestgate

# bytes: a file up to this size is verified by reading it back (root's relay does the same,
# movers/xrootd/upload.py): one round trip either way, and no checksum job on the server
READ_BACK_MAX = 64 << 10
HEAD_TIMEOUT = (30.0, 300.0)        # s: connect, then the answer (a digest of a big file)


@dataclass(frozen=True)
class Head:
    """What a ``HEAD`` answered: ``found`` False for 404; ``size`` and ``adler32`` (8
    lowercase hex digits, None where not asked or not sent) for a file."""
    found: bool
    size: int = 0
    adler32: str | None = None
    directory: bool = False


def head(url: str, token: str | None, *, digest: bool = False) -> Head | None:
    """``HEAD url`` (``Want-Digest: adler32`` with ``digest``); None: ask gfal2."""
    headers = davsession.auth(url, token)
    if digest:          # at most GRIDXFER_HTTP_DIGEST_SLOTS at once per server (digestgate)
        with digestgate.held(url):
            answer = _ask("HEAD", url, {**headers, "Want-Digest": "adler32"})
    else:
        answer = _ask("HEAD", url, headers)
    if answer is None or isinstance(answer, Head):
        return answer
    length = answer.headers.get("Content-Length", "")
    if answer.status != 200 or not length.isdigit():
        return None
    return Head(True, int(length), adler32_of(answer.headers.get("Digest", "")))


def read_back(url: str, token: str | None) -> Head | None:
    """``GET url``: a small file a copy just wrote, read back whole; its size and the
    adler32 of the bytes the server returned (no checksum job on the server: XrdHttp runs
    a digest as xrootd's, at most ``xrootd.chksum max`` at once, then ``kXR_wait 30``).
    None: ask gfal2."""
    answer = _ask("GET", url, {**davsession.auth(url, token), "Accept-Encoding": "identity"})
    if answer is None or isinstance(answer, Head):
        return answer
    data = answer.whole()
    return None if data is None else Head(True, len(data), normalise_adler32(adler32(data)))


def propstat(url: str, token: str | None) -> Head | None:
    """``PROPFIND url`` (``Depth: 0``): a file's size, or a directory; None: ask gfal2."""
    headers = {**davsession.auth(url, token), "Depth": "0",
               "Content-Type": "application/xml"}
    answer = _ask("PROPFIND", url, headers, body=_PROPS)
    if answer is None or isinstance(answer, Head):
        return answer
    return _propstat(answer.data) if answer.status == 207 else None


def _ask(method: str, url: str, headers: dict,
         body: bytes | None = None) -> davsession.Answer | Head | None:
    """The answer; ``Head(False)`` for 404; None for no answer (ask gfal2)."""
    try:
        answer = davsession.request(method, url, headers, body=body, timeout=HEAD_TIMEOUT)
    except davsession.NoAnswer:
        return None
    return Head(False) if answer.status == 404 else answer


_PROPS = (b'<?xml version="1.0" encoding="utf-8"?><D:propfind xmlns:D="DAV:"><D:prop>'
          b"<D:getcontentlength/><D:resourcetype/></D:prop></D:propfind>")


def _propstat(body: bytes) -> Head | None:
    """The first response of a multistatus: a collection, or a size; None if neither."""
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        return None
    response = next((e for e in root.iter() if _local(e.tag) == "response"), None)
    if response is None:
        return None
    length, directory = None, False
    for e in response.iter():
        name = _local(e.tag)
        if name == "getcontentlength" and (e.text or "").strip().isdigit():
            length = int((e.text or "").strip())
        elif name == "resourcetype":
            directory = any(_local(c.tag) == "collection" for c in e)
    if directory:
        return Head(True, length or 0, directory=True)
    return None if length is None else Head(True, length)


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def adler32_of(header: str) -> str | None:
    """The adler32 of a ``Digest`` header (``adler32=0a1b2c3d``, among others), zero-padded;
    None if it holds none."""
    for item in header.split(","):
        name, _, value = item.strip().partition("=")
        value = value.strip().lower()
        if name.strip().lower() == "adler32" and value and len(value) <= 8 \
                and all(c in "0123456789abcdef" for c in value):
            return normalise_adler32(value)
    return None


__all__ = ["HEAD_TIMEOUT", "READ_BACK_MAX", "Head", "adler32_of", "head", "propstat", "read_back"]
