"""click parameter types of gridxfer's options: a quantity with its unit (a duration, a size,
a rate) within its ``limits`` bound, a whole number, a fraction, ``NAME=VALUE``, a time
(``--since``) and a file the command will write.

Each one checks its value while click parses the command line, before the command does
anything, and refuses a bad one through click (``self.fail``: a BadParameter that knows its
parameter), so the one error line ``cli/main`` prints names the option::

    gridxfer: error: gridxfer copy: Invalid value for '-t' / '--timeout': not a duration:
    'abc' (try 30s, 18ms, 5m, 2h) (see 'gridxfer copy --help')
"""
from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Callable
from typing import Any

import click

from gridxfer.errors import UsageError
from gridxfer.limits import Limit
from gridxfer.units import parse_bitrate, parse_byterate, parse_duration, parse_size

_BARE_NUMBER = re.compile(r"\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*", re.A)


class Quantity(click.ParamType):
    """A value written with its unit, read by a ``gridxfer.units`` parser: more than 0 (or
    at least 0 with ``zero``) and within ``limit``. ``bare``: the unit a bare number takes
    (``--alert-floor 20`` is 20 MB/s); ``unit_example``: a bare number is refused instead
    (``--rtt 18`` could be 18 s or 18 ms)."""

    def __init__(self, name: str, parse: Callable[[str], float], limit: Limit, *,
                 zero: bool = False, bare: str | None = None,
                 unit_example: str | None = None) -> None:
        self.name, self.parse, self.limit = name, parse, limit
        self.zero, self.bare, self.unit_example = zero, bare, unit_example

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)             # a default given as a number: already one
        text = str(value).strip()
        if _BARE_NUMBER.fullmatch(text):
            if self.unit_example:
                self.fail(f"{text}: a number needs its unit, e.g. {self.unit_example}",
                          param, ctx)
            if float(text) < 0:
                self.fail(f"{value!r}: must be more than 0", param, ctx)
            if self.bare:
                text += self.bare
        try:
            number = float(self.parse(text))
        except UsageError as exc:
            self.fail(str(exc), param, ctx)
        if number < 0 or (number == 0 and not self.zero):
            self.fail(f"{value!r}: must be {'at least' if self.zero else 'more than'} 0",
                      param, ctx)
        above = self.limit.above(number, text)
        if above:
            self.fail(above, param, ctx)
        return number


def duration(limit: Limit, *, zero: bool = False, unit_example: str | None = None) -> Quantity:
    return Quantity("duration", parse_duration, limit, zero=zero, unit_example=unit_example)


def size(limit: Limit) -> Quantity:
    return Quantity("size", lambda t: float(parse_size(t)), limit)


def byterate(limit: Limit, *, bare: str | None = None) -> Quantity:
    return Quantity("rate", parse_byterate, limit, bare=bare)


def bitrate(limit: Limit, *, unit_example: str | None = None) -> Quantity:
    return Quantity("rate", parse_bitrate, limit, unit_example=unit_example)


class Whole(click.ParamType):
    """A whole number from ``low`` up to ``limit`` (whose refusal says why)."""

    name = "integer"

    def __init__(self, limit: Limit, low: int = 1) -> None:
        self.limit, self.low = limit, low

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            try:
                number = int(str(value).strip())
            except ValueError:
                self.fail(f"{value!r} is not a whole number", param, ctx)
        if number < self.low:
            self.fail(f"{number} is below {self.low}", param, ctx)
        above = self.limit.above(number, number)
        if above:
            self.fail(above, param, ctx)
        return number


class Number(click.ParamType):
    """A finite number from ``low`` to ``high`` (``open``: strictly between them); unlike
    click.FloatRange it refuses ``nan``."""

    name = "number"

    def __init__(self, low: float, high: float, *, open: bool = False, hint: str = "") -> None:
        self.low, self.high, self.open, self.hint = low, high, open, hint

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        inside = (self.low < number < self.high if self.open
                  else self.low <= number <= self.high)
        if not (math.isfinite(number) and inside):
            word = "strictly between" if self.open else "between"
            self.fail(f"{value!r}: must be {word} {self.low:g} and {self.high:g}{self.hint}",
                      param, ctx)
        return number


class Pair(click.ParamType):
    """``NAME=VALUE``, the value of type ``value``: (name, value)."""

    def __init__(self, value: click.ParamType) -> None:
        self.value = value
        self.name = f"name={value.name}"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> tuple[str, Any]:
        if isinstance(value, tuple):
            return value
        name, sep, raw = str(value).partition("=")
        if not sep or not name.strip():
            self.fail(f"{value!r}: expected NAME=VALUE", param, ctx)
        return name.strip(), self.value.convert(raw, param, ctx)


class Since(click.ParamType):
    """``2h`` (that long ago) or an ISO 8601 time, as unix time."""

    name = "when"

    def __init__(self, limit: Limit) -> None:
        self.limit = limit

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        from datetime import datetime
        if isinstance(value, float):
            return value
        t = str(value).strip()
        if t[:1].isdigit() and not any(c in t for c in "-:T"):
            return time.time() - duration(self.limit, zero=True).convert(t, param, ctx)
        try:
            return datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp()
        except (ValueError, OverflowError, OSError):
            self.fail(f"{value!r}: not a duration (2h) or an ISO 8601 time "
                      f"(2026-11-24T10:00Z)", param, ctx)


class NewFile(click.Path):
    """A file the command will write: its directory must exist and be writable, and the
    file, if there, must be a writable file, so the command is refused before it starts
    instead of failing (or only warning) once its work is done. ``suffix``: the name must
    end in it."""

    def __init__(self, suffix: str | None = None) -> None:
        super().__init__(dir_okay=False)
        self.suffix = suffix

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)
        text = os.fsdecode(path)
        if self.suffix and not text.endswith(self.suffix):
            self.fail(f"{text}: must end in {self.suffix}", param, ctx)
        parent = os.path.dirname(os.path.abspath(text))
        if not os.path.isdir(parent):
            self.fail(f"{text}: no such directory: {parent}", param, ctx)
        if os.path.lexists(text):
            if os.path.isdir(text):
                self.fail(f"{text}: is a directory", param, ctx)
            if not os.access(text, os.W_OK):
                self.fail(f"{text}: not writable", param, ctx)
        elif not os.access(parent, os.W_OK | os.X_OK):
            self.fail(f"{text}: cannot create a file in {parent}", param, ctx)
        return path
