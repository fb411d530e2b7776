"""Text shown to a person (terminal lines, reports, logs): ONE helper, ``printable``, for
every place that prints a file name, a URL or a tool's message.

A file name may hold characters that change what the reader sees rather than show
themselves: a newline or a terminal escape (a C0/C1 control), a line or paragraph
separator, or an invisible format character, among them the bidirectional controls
(U+202A-U+202E, U+2066-U+2069, U+200E/U+200F, U+061C): ``x\\u202etxt.exe`` shows as
``xexe.txt``. ``printable`` shows each of those as its Python escape (``\\n``, ``\\x1b``,
``\\u202e``), and leaves every other character, non-ASCII letters included, as it is.
Only what is shown changes: transfers and the journal keep the name's own characters.
"""
from __future__ import annotations

import unicodedata

# Unicode categories that are never shown as themselves: controls (Cc), format characters
# (Cf: bidi controls, zero-width characters, the BOM), lone surrogates (Cs: bytes that were
# not UTF-8) and the line and paragraph separators (Zl, Zp).
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def printable(text: str) -> str:
    """``text`` with each control, format (bidi, zero-width), surrogate and line or
    paragraph separator character escaped (``\\x1b``, ``\\u202e``): one line that cannot
    drive the terminal nor reorder itself."""
    if text.isprintable():              # most text: nothing to look at one by one
        return text
    return "".join(repr(ch)[1:-1] if unicodedata.category(ch) in _HIDDEN else ch
                   for ch in text)
