"""A local source's files must resolve inside its directory, links followed (``Within``),
checked when the campaign is planned so a run and a ``--dry-run`` refuse the same files."""
from __future__ import annotations

import os
import stat as stat_mod

from gridxfer.movers import names
from gridxfer.movers.urls import local_path


class Within:
    """A local source's files must resolve inside its directory, links followed, as the
    transfer checks them where it opens them (``names.check_within``): one that leaves is
    a bad name from the plan on, in a run and a dry run alike. A file that is not itself a
    link is its directory's real path (asked once per directory and listing) plus its
    name: one ``lstat`` a file; anything else gets ``check_within`` itself."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.root = os.path.realpath(local_path(base)).rstrip("/") + "/"
        self.dirs: dict[str, str] = {}

    def check(self, url: str) -> None:
        path = local_path(url)
        head, _, tail = path.rpartition("/")
        try:
            plain = not stat_mod.S_ISLNK(os.lstat(path).st_mode)
        except OSError:
            plain = False
        if plain:
            real = self.dirs.get(head)
            if real is None:
                real = self.dirs[head] = names.real_path(head or "/").rstrip("/") + "/"
            if (real + tail).startswith(self.root):
                return
        names.check_within(self.base, url)
