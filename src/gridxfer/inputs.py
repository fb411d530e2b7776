"""Reading the files users hand to gridxfer (campaign files, list files, topologies):
text that is not UTF-8, NUL bytes, YAML syntax errors and YAML nested too deeply all
become one ``SpecError`` naming ``file:line``, never a traceback."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from collections.abc import Callable

import yaml

from gridxfer.errors import SpecError


def read_text(path: str | os.PathLike, shown: str | None = None) -> str:
    """The file as text; SpecError (exit 2) when it cannot be read or is not UTF-8."""
    shown = shown or str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise SpecError(f"cannot read: {exc.strerror or exc}", path=shown) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise SpecError(f"not UTF-8 text (byte {raw[exc.start]:#04x})", path=shown,
                        line=line) from None


def check_utf8_line(raw: bytes, path: str, line: int) -> str:
    """One line of a line-oriented file (list files), decoded or refused with its number."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"not UTF-8 text (byte {raw[exc.start]:#04x})", path=path,
                        line=line) from None
    if "\0" in text:
        raise SpecError("NUL byte in the line", path=path, line=line)
    return text


MAX_DEPTH = 100     # no gridxfer file nests beyond 6; PyYAML's scanner is quadratic in it
_BRACKETS = re.compile(r"[\[\]{}]")


def parse_yaml(parse: Callable[[str], Any], text: str, shown: str) -> Any:
    """``parse(text)`` with every YAML failure turned into one SpecError naming the line."""
    _check_depth(text, shown)
    try:
        return parse(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise SpecError(f"YAML syntax: {_first(exc.problem or exc.context)}", path=shown,
                        line=mark.line + 1 if mark else None) from None
    except yaml.reader.ReaderError as exc:     # a character YAML does not allow (NUL, ...)
        line = text[:exc.position].count("\n") + 1
        what = "NUL byte" if exc.character == 0 else f"character {exc.character!r}"
        raise SpecError(f"{what} not allowed in YAML", path=shown, line=line) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"YAML: {_first(exc)}", path=shown) from None
    except (ValueError, TypeError, OverflowError) as exc:   # a tag's value (!!float x)
        raise SpecError(f"bad YAML value: {_first(exc)}", path=shown) from None
    except RecursionError:
        raise SpecError(f"YAML nested deeper than {MAX_DEPTH} levels", path=shown) from None


def _check_depth(text: str, shown: str) -> None:
    """Refuse flow collections ([ {) nested deeper than MAX_DEPTH before YAML sees them
    (brackets inside quoted strings count too: harmless at this depth)."""
    depth = 0
    for m in _BRACKETS.finditer(text):
        depth += 1 if m.group() in "[{" else -1 if depth else 0
        if depth > MAX_DEPTH:
            raise SpecError(f"YAML nested deeper than {MAX_DEPTH} levels", path=shown,
                            line=text.count("\n", 0, m.start()) + 1)


def _first(text: object) -> str:
    lines = str(text).strip().splitlines()
    return " ".join(lines[0].split()) if lines else "?"
