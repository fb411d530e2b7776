"""Tables that fit the terminal: whole columns are dropped, never numbers cut.

A table is a list of ``Column``s (header, cells, ``keep``: lower goes first, 0 never).
``fit`` drops the columns a width cannot hold, lowest ``keep`` first; ``table`` makes the
rich ``Table`` of what is left, every cell unwrapped at its full width, so a figure reads
``25.17 MB/s`` or is not shown at all (``12/…`` and numbers wrapped mid-way are gone).
Text cells of a ``wrap`` column (a reason, a list of errors) may wrap at spaces instead.
``lines`` joins labelled parts (``files 12/40``) into lines no wider than the terminal,
breaking between parts only.
"""
from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

GAP = 2             # between two columns: rich's padding (0, 1), no outer edge
MIN_WRAP = 12       # a wrapping column keeps at least this much


@dataclass(frozen=True)
class Column:
    header: str
    cells: tuple[str, ...]
    keep: int = 0                   # 0: always shown; else dropped lowest first
    right: bool = True              # numbers right-aligned
    wrap: bool = False              # text that may wrap at spaces

    @property
    def width(self) -> int:
        return max([len(self.header), *(len(c) for c in self.cells)])

    @property
    def need(self) -> int:
        return min(self.width, MIN_WRAP) if self.wrap else self.width


def fit(columns: Sequence[Column], width: int) -> list[Column]:
    """The columns that fit ``width``, in their order; drops by ``keep`` (lowest first)."""
    shown = list(columns)
    while len(shown) > 1 and _need(shown) > width:
        droppable = [c for c in shown if c.keep > 0]
        if not droppable:
            break
        shown.remove(min(droppable, key=lambda c: c.keep))
    return shown


def _need(cols: Sequence[Column]) -> int:
    return sum(c.need for c in cols) + GAP * (len(cols) - 1)


def table(columns: Sequence[Column], width: int, title: str | None = None) -> Any:
    from rich.table import Table
    shown = fit(columns, width)
    t = Table(box=None, padding=(0, 1), pad_edge=False, header_style="bold", title=title,
              title_justify="left", title_style="bold")
    for c in shown:
        t.add_column(c.header, justify="right" if c.right else "left", no_wrap=not c.wrap,
                     min_width=c.need, overflow="fold" if c.wrap else "ignore")
    for row in zip(*(c.cells for c in shown), strict=True):
        t.add_row(*row)
    return t


def lines(parts: Sequence[str], width: int, sep: str = "  ") -> list[str]:
    """``parts`` joined by ``sep`` into lines of at most ``width`` (a part longer than the
    width stays whole on its own line)."""
    out: list[str] = []
    cur = ""
    for p in parts:
        if cur and len(cur) + len(sep) + len(p) > width:
            out.append(cur)
            cur = p
        else:
            cur = f"{cur}{sep}{p}" if cur else p
    if cur:
        out.append(cur)
    return out


def terminal_width() -> int | None:
    """stdout's width on a terminal; None for a pipe or a file (lines stay whole there, for
    grep and scripts)."""
    try:
        tty = sys.stdout.isatty()
    except (AttributeError, ValueError):
        return None
    return shutil.get_terminal_size().columns if tty else None


def summary(text: str, width: int | None) -> list[str]:
    """A summary line broken after a ``,``, ``:`` or ``;`` (between figures) to fit ``width``;
    continuation lines indented. One line when ``width`` is None or it fits."""
    if width is None or len(text) <= width:
        return [text]
    out = lines(re.split(r"(?<=[,:;]) ", text), width, sep=" ")
    return out[:1] + ["  " + ln for ln in out[1:]]
