"""The forms of a campaign URL each tool must get (the names rule, movers/names.py, makes
the URL; these hand it to gfal2, XrdCl's CopyProcess or globus-url-copy unchanged in
meaning)."""
from __future__ import annotations

import os
from urllib.parse import quote

from gridxfer.movers.names import PLAIN_URL, bad_name
from gridxfer.movers.urls import local_path, scheme_of


def encoded(url: str) -> bool:
    """The URL's path holds a percent-encoded character (its name is not plain)."""
    return "%" in url.partition("://")[2]


def gfal_url(url: str) -> str:
    """A root:// URL as gfal2 must get it: gfal2 decodes ``%XX`` before XrdCl (which
    does not) sees the path. Other schemes are already in gfal2's form."""
    if scheme_of(url) != "root" or PLAIN_URL.fullmatch(url):
        return url
    head, sep, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    return f"{head}{sep}{host}{slash}{quote(path, safe='/+=,@')}"


def xrdcl_local(url: str) -> str:
    """A local path for XrdCl's CopyProcess, which cuts it at a '?' as it cuts URLs."""
    path = local_path(url)
    if "?" in path:
        raise bad_name(path, "XRootD cannot carry '?' in a local path")
    return path


def tool_url(url: str) -> str:
    """A file:// URL for a tool that percent-decodes it (globus-url-copy)."""
    return "file://" + quote(os.path.abspath(local_path(url)), safe="/")
