"""File names in URLs: ONE rule, per protocol.

A campaign's file names (spec lists, list files, globs, listings) are *raw* names: the
characters of the name as the file system or the server has it, ``/`` between
directories. They enter URLs only through ``join_url`` and leave listings only through
``listed_name``; a mover turns a URL back into the path a server or file system sees only
through ``server_path`` (or ``urls.local_path``), and refuses, through ``check_url``, a URL
whose path would leave its directory.

A name is bad (``ErrorClass.BAD_NAME``: the file fails alone, never retried) if it

- is empty, or has an empty, ``.`` or ``..`` component (``a//b``, ``/a``, ``a/``,
  ``a/../b``);
- has a control character (NUL, C0, DEL, C1) or a line/paragraph separator;
- has a component longer than NAME_MAX, 255 bytes (no file system takes it; the
  temporary name of a long one is shortened: ``urls.temp_stem``);
- cannot be carried by the protocol (table below), or a listed component holds ``/``
  once decoded (``a%2fb`` on a protocol that decodes);
- is a local file whose real path (symbolic links resolved) is outside the campaign's
  source or destination directory (``check_within``).

How each protocol carries a name (measured with xrootd 5.5.3, globus-url-copy 10.12,
gfal2 2.21; tests/integration/test_hostile_names.py):

=============== ====================== ==============================================
scheme          in the URL             why
=============== ====================== ==============================================
file, bare path as is, never decoded   gridxfer, XrdCl and gfal2's file plugin read a
                                       local path literally; globus-url-copy decodes
                                       file:// URLs, so ``toolurls.tool_url`` quotes
root            as is; ``?`` refused   XrdCl never decodes ``%XX`` (``a%3Fb`` is the
                                       file ``a%3Fb``) and reads all after the first
                                       ``?`` as CGI: ``data.root?oss.asize=5`` opens
                                       ``data.root``. No escape exists
                                       (XrdClURL.cc, ``URL::ParsePath``: splits at the
                                       first ``?``, decodes nothing)
gsiftp          percent-encoded        globus_url_parse and gfal2 decode ``%XX`` and
                                       refuse a raw ``#`` or non-ASCII byte
ftp             as gsiftp; non-ASCII   globus-gridftp-server's clear-text commands pass
                refused                its telnet XIO driver, which drops every byte
                                       outside 32-126: ``STOR ä1.txt`` writes ``1.txt``
davs, https     percent-encoded;       davix sends the path as given; XrdHttp decodes
                ``?`` refused          ``%XX`` (``+`` stays ``+``), then cuts at a
                                       decoded ``?`` as at CGI (``a%3Fb`` writes ``a``).
                                       Its MOVE does not decode ``Destination``:
                                       ``davmove.py`` sends it decoded (a name
                                       ending in a space: written in place)
anything else   percent-encoded        ``register`` a scheme whose tools read it
                                       differently
=============== ====================== ==============================================

Percent-encoding keeps ASCII letters, digits, ``-._~+=,@`` and ``/``: a plain name
(``run1/f000001.root``) is the same in every protocol and takes the fast path.
"""
from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.urls import NAME_MAX, local_path, scheme_of, url_path


@dataclass(frozen=True)
class Protocol:
    decodes: bool               # the protocol's tools percent-decode the path
    refuses: str = ""           # characters no escape can carry
    ascii_only: bool = False    # no escape carries a non-ASCII character (ftp://)


LITERAL = Protocol(decodes=False)
ENCODED = Protocol(decodes=True)
PROTOCOLS: dict[str, Protocol] = {"file": LITERAL, "root": Protocol(False, "?"),
                                  "gsiftp": ENCODED, "ftp": Protocol(True, ascii_only=True),
                                  "davs": Protocol(True, "?"), "https": Protocol(True, "?")}

_PLAIN = re.compile(r"[A-Za-z0-9_~+=,@-][A-Za-z0-9._~+=,@-]*"
                    r"(?:/[A-Za-z0-9_~+=,@-][A-Za-z0-9._~+=,@-]*)*")
PLAIN_URL = re.compile(r"[A-Za-z0-9+.-]+://[A-Za-z0-9._~:@\[\]-]*[A-Za-z0-9._~+=,@/-]*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def register(scheme: str, protocol: Protocol) -> None:
    """How the tools of a new scheme read paths (unknown schemes are percent-encoded)."""
    PROTOCOLS[scheme] = protocol


def protocol(scheme: str) -> Protocol:
    return PROTOCOLS.get(scheme, ENCODED)


NOT_ASCII = ("{scheme}:// cannot carry a non-ASCII character in a path (the server's "
             "clear-text control channel drops it); use gsiftp://")


def bad_name(name: str, why: str) -> TransferError:
    return TransferError(ErrorClass.BAD_NAME, f"bad file name {name!r}: {why}")


def has_control(text: str) -> bool:
    """``text`` holds a control character or a line/paragraph separator."""
    return bool(_CONTROL.search(text))


def valid_utf8(text: str) -> bool:
    """False for text decoded from bytes that are not UTF-8 (surrogate escapes)."""
    return not _SURROGATE.search(text)


def check_name(name: str) -> None:
    """The protocol-free part of the rule (module docstring); raises ``bad_name``."""
    if _PLAIN.fullmatch(name) and len(name) <= NAME_MAX:
        return
    if not name:
        raise bad_name(name, "empty")
    if _CONTROL.search(name):
        raise bad_name(name, "control character")
    if not valid_utf8(name):          # os.fsdecode of bytes that are not UTF-8
        raise bad_name(name, "not valid UTF-8 (URLs carry UTF-8 names only)")
    for part in name.split("/"):
        if part in ("", ".", ".."):
            raise bad_name(name, "empty, '.' or '..' path component")
        if len(part.encode()) > NAME_MAX:
            raise bad_name(name, too_long(part))


def too_long(part: str) -> str:
    return (f"a path component of {len(part.encode('utf-8', 'surrogatepass'))} bytes, "
            f"longer than NAME_MAX ({NAME_MAX} bytes, the longest file name a file system "
            f"takes)")


def quote_name(scheme: str, name: str, *, check: bool = True) -> str:
    """``name`` as it goes into a URL of ``scheme``. ``check=False`` never raises: for
    listings and journal rows whose name the transfer checks again (``check_transfer``)."""
    if _PLAIN.fullmatch(name) and (len(name) <= NAME_MAX or not check):
        return name
    if check:
        check_name(name)
    proto = protocol(scheme)
    if check:
        for ch in proto.refuses:
            if ch in name:
                raise bad_name(name, f"{scheme}:// cannot carry {ch!r} in a path")
        if proto.ascii_only and not name.isascii():
            raise bad_name(name, NOT_ASCII.format(scheme=scheme))
    return quote(name, safe="/+=,@") if proto.decodes else name


def join_url(base: str, name: str, *, check: bool = True) -> str:
    """The URL of ``name`` under the directory URL ``base``."""
    if _PLAIN.fullmatch(name) and (len(name) <= NAME_MAX or not check):   # as quote_name
        return base.rstrip("/") + "/" + name
    return base.rstrip("/") + "/" + quote_name(scheme_of(base), name, check=check)


def listed_name(url: str) -> str:
    """The raw name of a listing entry's URL (its last component, decoded as its
    protocol's tools decode it). May hold '/' if a server sent one: ``check_component``."""
    last = url.rstrip("/").rpartition("/")[2]
    return unquote(last) if protocol(scheme_of(url)).decodes else last


def check_component(name: str) -> None:
    if "/" in name:
        raise bad_name(name, "'/' inside a listed name")
    check_name(name)


def server_path(url: str) -> str:
    """The path the server (or the file system) sees for ``url``: local paths as is,
    root:// up to the CGI, others percent-decoded. Raises ``bad_name`` on control
    characters (a CR/LF would end a GridFTP command)."""
    if _CONTROL.search(url):
        raise bad_name(url, "control character")
    scheme = scheme_of(url)
    if scheme == "file":
        path = local_path(url)
    elif protocol(scheme).decodes:
        path = unquote(urlsplit(url).path) or "/"
    else:
        path = url_path(url)
    if _CONTROL.search(path):
        raise bad_name(path, "control character")
    return path


def check_url(url: str) -> None:
    """A mover's last check before a tool sees ``url``: the path the tool reads has no
    control character, no ``.``/``..`` component, no component that decodes to one with
    a '/' in it, no CGI on root:// and none longer than NAME_MAX. Raises ``bad_name``."""
    if "/." not in url and len(url) <= NAME_MAX and PLAIN_URL.fullmatch(url):
        return                      # nothing to decode, no dot component: most URLs
    scheme = scheme_of(url)
    proto = protocol(scheme)
    if scheme == "file":
        raw = local_path(url)
    else:
        raw = urlsplit(url.replace("?", "%3F").replace("#", "%23")).path \
            if not proto.decodes else urlsplit(url).path
        if proto.refuses and any(ch in url.partition("://")[2] for ch in proto.refuses):
            raise bad_name(url, f"{scheme}:// URL with {proto.refuses!r}")
    if _CONTROL.search(url):
        raise bad_name(url, "control character")
    for part in raw.split("/"):
        name = unquote(part) if proto.decodes else part
        if name in (".", "..") or (proto.decodes and "/" in name):
            raise bad_name(url, "path component escapes its directory")
        if proto.decodes and proto.refuses and any(ch in name for ch in proto.refuses):
            raise bad_name(url, f"{scheme}:// cannot carry {proto.refuses!r} in a path")
        if proto.decodes and _CONTROL.search(name):
            raise bad_name(url, "control character")
        if proto.ascii_only and not name.isascii():
            raise bad_name(url, NOT_ASCII.format(scheme=scheme))
        if len(name) > NAME_MAX // 4 and len(name.encode("utf-8", "surrogatepass")) > NAME_MAX:
            raise bad_name(url, too_long(name))


def check_within(base: str, url: str) -> None:
    """``url`` lies under the directory URL ``base``: for local files the real paths
    (symbolic links resolved) are compared; remote paths lexically. Raises ``bad_name``."""
    check_url(url)
    if scheme_of(url) == "file" and scheme_of(base) == "file":
        root = _real_dir(local_path(base))
        path = real_path(local_path(url))
    elif url.startswith(base.rstrip("/") + "/") and PLAIN_URL.fullmatch(url):
        return                      # checked above: no dot component, nothing decoded
    else:
        root, path = _collapse(server_path(base)), _collapse(server_path(url))
    if path == root or not path.startswith(root.rstrip("/") + "/"):
        raise bad_name(url, f"resolves outside {base}")


def real_path(path: str) -> str:
    """``os.path.realpath(path)`` from the kernel for a file that exists: opened with
    ``O_PATH`` (symbolic links followed, nothing read), its ``/proc/self/fd`` link read
    back. Three system calls in place of the Python loop of ``realpath`` (an lstat and a
    readlink per component): that loop was 12 % of a small-file campaign's CPU samples
    (py-spy, 5,000 x 4 KB to loopback XRootD). A path that does not open (missing, no
    /proc) gets ``os.path.realpath``."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return os.path.realpath(path)
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)
    finally:
        os.close(fd)
    return real if real.startswith("/") else os.path.realpath(path)


@functools.lru_cache(maxsize=64)
def real_dir(base: str) -> bytes:
    """The real path of the file:// directory URL ``base`` (links resolved, once per
    process), for a check made where the file is opened (relaynative: gx_upload's root)."""
    return os.fsencode(_real_dir(local_path(base)))


@functools.lru_cache(maxsize=64)
def _real_dir(path: str) -> str:
    """A campaign's source or destination directory, resolved once per process."""
    return os.path.realpath(path)


def _collapse(path: str) -> str:
    return re.sub("/+", "/", path)


def check_transfer(name: str, src_base: str, src: str, dst_base: str, dst: str, *,
                   source_confined: bool = False) -> None:
    """Before a campaign's copy: both URLs are exactly ``join_url`` of the name (so a
    journal row cannot smuggle another path in) and lie under their directories.
    ``source_confined``: the mover resolves a local source's links where it opens it
    (``TransferParams.source_base``), so only its URL is checked here."""
    for base, url in ((src_base, src), (dst_base, dst)):
        if url != join_url(base, name):
            raise bad_name(name, f"{url} is not its URL under {base}")
        if url == src and source_confined and scheme_of(src) == "file":
            check_url(src)          # the mover resolves its links where it opens it
        else:
            check_within(base, url)
