"""The one WebDAV ``MOVE`` gfal2 cannot send: a temporary name renamed to a final name
that needs percent-encoding in a URL, with the ``Destination`` header carrying the
DECODED path (the name's own UTF-8 bytes; the request line stays percent-encoded).

Why own code here: XrdHttp 5.5.3 hands the ``Destination`` path to the file system as
it is, without ``%XX`` decoding (XrdHttpReq.cc, ``rtMOVE``: ``parseURL(destination)``
then the path goes into ``kXR_mv`` unchanged), and gfal2/davix always send the
percent-encoded URL there: ``MOVE .../.sp%20ace.dat.gxpart-x`` to ``.../sp%20ace.dat``
makes the file ``sp%20ace.dat``. Neither has an option for a raw header (gfal2's
``rename`` takes two URLs). Measured on the testbed's XrdHttp 5.5.3 over TLS, anonymous
and with SciTokens (tests/integration/test_davs_movers.py), name by name:

============================ ======================== ================================
name                         encoded ``Destination``  decoded ``Destination`` (here)
============================ ======================== ================================
``sp ace``, ``hash#tag``,    the literal ``%XX`` name the right name
``pct%41``, ``ünï``,
``quote'"``, ``amp&semi;``,
``colon:x``, `` lead``
``plus+sign``                right (nothing encoded)  right
``trail ``                   ``trail%20``             ``trail`` (XrdHttp trims the
                                                      header value): not carried
``q?mark``                   cut at ``?`` (a bad      cut at ``?``: not carried
                             name for davs anyway)
============================ ======================== ================================

So ``carries(url)`` is true for every name but one that ends in white space (or holds
``?``, which ``names`` refuses for davs anyway); ``davs.py`` writes those few in place,
as before. A ``MOVE`` onto an existing name replaces it (201), as gfal2's rename does.

Only where measured: ``plan(url)`` asks the server once (an ``OPTIONS``; its ``Server``
header, cached per host) and sends the decoded ``Destination`` to XrdHttp 5.5 only
(``Server: XrootD/v5.5.x``). Any other server gets gfal2's rename, the percent-encoded
``Destination`` RFC 4918 asks for (dCache, StoRM and EOS decode it: a decoded one would
turn ``pct%41`` into ``pctA`` there). Another XrdHttp version, or a server that does not
answer, gets the old way: written in place (the right name, visible while written).

TLS and auth: this thread's ``davsession`` (trust and credentials as gfal2's: the
system's CAs and ``X509_CERT_DIR``; the destination's bearer token, else the X.509 proxy).
A token is never logged, put in an error or in a URL.
"""
from __future__ import annotations

import re
import threading
from urllib.parse import unquote, urlsplit

from gridxfer.display import printable
from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers import names
from gridxfer.movers.classify import transfer_error
from gridxfer.movers.gfal import davsession
from gridxfer.movers.gfal.davput import CONNECT_TIMEOUT, stall_timeout

_TRIMMED = " \t\r\n\v\f"            # XrdHttp trims these off the header value's ends


def carries(url: str) -> bool:
    """A decoded ``Destination`` names ``url``'s file exactly on XrdHttp 5.5.3
    (module docstring: not a name ending in white space, not one with '?')."""
    path = unquote(urlsplit(url).path)
    return bool(path) and "?" not in path and path[-1] not in _TRIMMED \
        and not names.has_control(path)


MEASURED = re.compile(r"XrootD/v5\.5\.\d+\b")   # the XrdHttp whose MOVE the table shows
_kinds: dict[str, str] = {}                        # host:port -> server_kind()
_kinds_lock = threading.Lock()


def server_kind(url: str, token: str | None = None) -> str:
    """``literal`` (XrdHttp 5.5: the table above), ``rfc`` (not XRootD: decodes the
    percent-encoded Destination) or ``unknown`` (another XrdHttp, or no answer), from the
    ``Server`` header of one ``OPTIONS``; remembered per host:port once answered."""
    parts = urlsplit(url)
    with _kinds_lock:
        known = _kinds.get(parts.netloc)
    if known is not None:
        return known
    scheme = davsession.HTTP_SCHEME.get(parts.scheme, "https")
    headers = davsession.auth(url, token)
    try:
        answer = davsession.request("OPTIONS", f"{scheme}://{parts.netloc}/", headers,
                                    timeout=_timeout())
    except davsession.NoAnswer:
        return "unknown"                  # asked again next time
    server = answer.headers.get("Server", "")
    kind = "literal" if MEASURED.search(server) else \
        "unknown" if "xrootd" in server.lower() else "rfc"
    with _kinds_lock:
        _kinds[parts.netloc] = kind
    return kind


def plan(url: str, token: str | None = None) -> str:
    """How a file bound for ``url`` (a name that needs percent-encoding) reaches its
    name: ``raw`` (temporary name, then ``move`` here), ``encoded`` (temporary name, then
    gfal2's rename) or ``in_place`` (written under its final name)."""
    kind = server_kind(url, token)
    if kind == "literal":
        return "raw" if carries(url) else "in_place"
    return "encoded" if kind == "rfc" else "in_place"


def move(src: str, dst: str, token: str | None = None) -> None:
    """WebDAV ``MOVE`` of ``src`` to ``dst`` (one server), the destination path sent
    decoded. ``token``: the destination's bearer token. Raises ``TransferError``."""
    if not carries(dst):
        raise names.bad_name(unquote(urlsplit(dst).path),
                             "XrdHttp's MOVE cannot name it (a trailing space or '?')")
    parts = urlsplit(dst)
    scheme = davsession.HTTP_SCHEME.get(parts.scheme)
    if scheme is None or urlsplit(src).netloc != parts.netloc:
        raise TransferError(ErrorClass.OTHER, f"{src} -> {dst}: MOVE within one davs server only")
    destination = f"{scheme}://{parts.netloc}{unquote(parts.path)}".encode()
    headers = {**davsession.auth(dst, token), "Destination": destination}
    timeout = _timeout()
    try:
        answer = davsession.request("MOVE", src, headers, timeout=timeout)
    except davsession.Stalled:
        raise TransferError(ErrorClass.TIMEOUT,
                            f"{dst}: MOVE had no answer in {timeout[1]:.0f} s") from None
    except davsession.NoAnswer as exc:
        raise transfer_error(f"MOVE: no answer ({exc})", dst, side="destination") from None
    if answer.status not in (200, 201, 204):
        text = printable(" ".join(answer.data.decode("utf-8", "replace").split())[:200])
        raise transfer_error(f"MOVE: HTTP {answer.status} {answer.reason}: {text}", dst,
                             side="destination")


def _timeout() -> tuple[float, float]:
    """(connect, answer) of a request without data: the answer within
    ``GRIDXFER_HTTP_STALL_TIMEOUT``, as a small file's PUT."""
    return CONNECT_TIMEOUT, stall_timeout()
