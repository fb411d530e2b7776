"""URL helpers of the movers: schemes, paths, login names and the hidden temporary names
of the integrity path (common.py). No I/O, no heavy imports: the registry routes on them."""
from __future__ import annotations

import hashlib
import os
import re
from urllib.parse import unquote, urlsplit, urlunsplit

from gridxfer.errors import UsageError

TEMP_MARK = ".gxpart-"
# roots/xroots: XRootD over TLS from the first byte (GSI or ztn servers): the same mover;
# XrdCl reads the scheme from the URL itself, which is kept as written
SCHEME_ALIASES = {"xroot": "root", "roots": "root", "xroots": "root", "": "file",
                  "gridftp": "gsiftp"}
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")     # urlsplit's rule: up to the first ':'
# The text up to a URL's first ':' -> its scheme, for the schemes campaigns use, as
# written in lower case: nothing urlsplit strips or rejects can change these (leading
# blanks, tabs and line breaks are not in them; non-ASCII hosts and brackets go the
# careful way, where urlsplit may refuse them).
_KNOWN = {f"{s}:": SCHEME_ALIASES.get(s, s) for s in (
    "root", "xroot", "roots", "xroots", "file", "https", "http", "davs", "dav", "gsiftp",
    "gridftp", "s3", "srm")}


def _plain(url: str) -> bool:
    """A URL urlsplit reads as written: ASCII, no brackets (IPv6 hosts, which urlsplit
    validates), nothing it strips (leading controls and spaces, tabs, line breaks)."""
    return (url.isascii() and url[:1] > " " and "[" not in url and "]" not in url
            and "\t" not in url and "\r" not in url and "\n" not in url)


def scheme_of(url: str) -> str:
    """The URL's scheme, lower case, with aliases resolved ("" -> "file").

    The scheduler asks this several times per file: a URL of a scheme campaigns use is
    read by its head (``_KNOWN``), another plain URL (``_plain``) with one regex match
    (0.4 us against urlsplit's 2.2 us); anything else goes through
    urlsplit, which also rejects malformed IPv6 hosts. Both give the same scheme
    (tests/unit/movers/test_movers_urls.py)."""
    known = _KNOWN.get(url[:url.find(":") + 1])
    if known is not None and url.isascii() and "[" not in url and "]" not in url:
        return known                # "root:..." in ASCII, no IPv6 brackets: 0.2 us
    if _plain(url):
        m = _SCHEME.match(url)
        scheme = m.group()[:-1].lower() if m else ""
    else:
        scheme = urlsplit(url).scheme.lower()
    return SCHEME_ALIASES.get(scheme, scheme)


def server_of(url: str) -> str:
    """``scheme://host[:port]`` as written: the server a URL's requests go to (the key
    under which sessions, tape requests and recovery group a campaign's URLs)."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}"


def local_path(url: str) -> str:
    """The filesystem path of a file:// URL or a bare path, never decoded and never cut:
    ``file:///d/a?b#c`` is the file ``/d/a?b#c`` (movers/names.py).

    ``file:///path`` and ``/path`` are read without urlsplit: every local source file of a
    campaign comes through here."""
    if _plain(url):
        if url.startswith("file:///"):
            return url[7:]
        if url[:1] == "/" and url[1:2] != "/":
            return url
    # urlsplit for the scheme and host checks; '%', '?' and '#' escaped so that the path
    # comes back whole (urlsplit itself never decodes).
    parts = urlsplit(url.replace("%", "%25").replace("?", "%3F").replace("#", "%23"))
    if parts.scheme not in ("", "file"):
        raise UsageError(f"not a local URL: {url}")
    if parts.netloc not in ("", "localhost"):
        raise UsageError(f"file:// URL with a remote host: {url}")
    return unquote(parts.path) or "/"


def url_path(url: str) -> str:
    """Path part of a root:// URL as XRootD reads it: up to the CGI ('?'), '#' kept,
    never decoded; the leading double slash collapsed."""
    rest = url.partition("://")[2]
    slash = rest.find("/")
    path = rest[slash:].partition("?")[0] if slash >= 0 else ""
    while path.startswith("//"):
        path = path[1:]
    return path or "/"


def split_dir(url: str) -> tuple[str, str]:
    """(parent URL, base name) of a file URL."""
    head, _, name = url.rstrip("/").rpartition("/")
    if not name:
        raise UsageError(f"URL has no file name: {url}")
    return head + "/", name


def temp_url(dst: str, token: str | None = None) -> str:
    """A hidden temporary name in the destination's directory: ``.<name>.gxpart-<token>``
    (a random token unless given; ``<name>`` is ``temp_stem``'s, shortened for a long
    name so the temporary name stays within NAME_MAX)."""
    parent, name = split_dir(dst)
    return f"{parent}.{temp_stem(name)}{TEMP_MARK}{token or os.urandom(4).hex()}"


NAME_MAX = 255      # bytes of one path component (Linux; XRootD, dCache, EOS servers too)
TOKEN_MAX = 16      # characters of a temporary name's token (a campaign's: 6 + attempt id)
_STEM_MAX = NAME_MAX - 1 - len(TEMP_MARK) - TOKEN_MAX
_CHAR = re.compile(r"%[0-9A-Fa-f]{2}|.", re.S)
_UTF8_CONTINUATION = re.compile(r"%[89AaBb][0-9A-Fa-f]")


def temp_stem(name: str) -> str:
    """The ``<name>`` of ``.<name>.gxpart-<token>`` for the base name ``name`` (URL form):
    ``name`` itself while the temporary name fits NAME_MAX, else its first characters, a
    ``~`` and 8 hex digits of its sha256 (so the temporary name of any name up to
    NAME_MAX fits, and two long names that begin alike keep distinct ones; recovery finds
    them by this prefix). Measured on the URL form, which is never shorter than the name
    the server sees (``%XX`` decodes to one byte), and cut only between characters: never
    inside a ``%XX`` escape nor a UTF-8 sequence, raw or escaped."""
    if len(name.encode("utf-8", "surrogatepass")) <= _STEM_MAX:
        return name
    budget, used, cut = _STEM_MAX - 9, 0, 0
    for m in _CHAR.finditer(name):
        used += len(m.group().encode("utf-8", "surrogatepass"))
        if used > budget:
            break
        if not _UTF8_CONTINUATION.match(name, m.end()):
            cut = m.end()
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{name[:cut]}~{digest}"


def attempt_temp_url(dst: str, token: str) -> str | None:
    """The temporary name of one campaign attempt (the scheduler journals it before the
    transfer starts and the mover writes exactly there: ``TransferParams.temp_url``);
    None for a URL without a file name (the attempt fails on it, never the dispatcher)."""
    try:
        return temp_url(dst, token)
    except UsageError:
        return None


def is_temp_name(name: str) -> bool:
    return name.startswith(".") and TEMP_MARK in name


def with_user(url: str, user: str) -> str:
    """``url`` with a login name (XRootD opens one channel per host:port + user)."""
    parts = urlsplit(url)
    if "@" in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=f"{user}@{parts.netloc}"))
