"""Metadata through a gfal2 context, shared by the gfal2 and davs movers: one ``stat`` and
one directory listing, with gfal2's errors classified by ``classify.transfer_error``."""
from __future__ import annotations

import stat as pystat
from typing import Any

import gfal2

from gridxfer.movers import names
from gridxfer.movers.base import Entry
from gridxfer.movers.classify import transfer_error


def stat_entry(ctx: Any, url: str, gurl: str | None = None) -> Entry:
    """``url`` as an Entry; ``gurl`` is the spelling gfal2 is given, if it differs."""
    try:
        st = ctx.stat(gurl or url)
    except gfal2.GError as exc:
        raise transfer_error(exc, url) from None
    return Entry(url=url, size=int(st.st_size), is_dir=pystat.S_ISDIR(st.st_mode))


def list_entries(ctx: Any, url: str, gurl: str | None = None) -> list[Entry]:
    """The entries of directory ``url``, sorted by URL, without ``.`` and ``..``."""
    base = url.rstrip("/") + "/"
    out = []
    try:
        handle = ctx.opendir(gurl or base)
        while True:
            dirent, st = handle.readpp()
            if dirent is None:
                break
            if dirent.d_name in (".", ".."):
                continue
            out.append(Entry(url=names.join_url(base, dirent.d_name, check=False),
                             size=int(st.st_size), is_dir=pystat.S_ISDIR(st.st_mode)))
    except gfal2.GError as exc:
        raise transfer_error(exc, url) from None
    return sorted(out, key=lambda e: e.url)
