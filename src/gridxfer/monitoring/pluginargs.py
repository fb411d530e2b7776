"""Argument types of the ``check_gridxfer_*`` plugins: each refuses a bad value with one
line that names what was expected (argparse adds the option's name; ``nagios.run_plugin``
turns it into UNKNOWN, exit 3: guidelines, "Plugin Return Codes").

Thresholds follow the guidelines' "Threshold and ranges" section
(https://www.monitoring-plugins.org/doc/guidelines.html#THRESHOLDFORMAT):
``[@]start:end``; ``start:`` may be left out when it is 0, ``end`` when it is infinity;
``~`` is negative infinity; ``@`` alerts inside the range. :func:`range_arg` checks that
syntax itself and then builds the ``nagiosplugin.Range``: nagiosplugin's own parser gives
Python's messages (``invalid literal for int()``) and takes what the syntax does not
(``1_000``, `` 5``, non-ASCII digits).
"""
from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nagiosplugin

from gridxfer.errors import GridxferError
from gridxfer.limits import MAX_WINDOW
from gridxfer.units import _show, parse_duration

RANGE_FORM = "[@]start:end, e.g. 10, 200:, ~:10, @10:20"
_NUMBER = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_RANGE = re.compile(rf"@?(?:(?P<start>~|{_NUMBER})?:)?(?P<end>{_NUMBER})?", re.ASCII)
LATEST_TIME = 253402300799.0        # 9999-12-31T23:59:59Z: a time every platform can show


def range_arg(text: str) -> nagiosplugin.Range:
    """A Nagios threshold range (see module doc), or an argparse error naming the form."""
    m = _RANGE.fullmatch(text)
    if not m:
        raise argparse.ArgumentTypeError(f"{_show(text)} is not a range ({RANGE_FORM})")
    for atom in (m["start"], m["end"]):
        if atom not in (None, "~") and math.isinf(float(atom)):
            raise argparse.ArgumentTypeError(f"{_show(text)}: number too large for a range")
    try:
        return nagiosplugin.Range(text)
    except ValueError as exc:           # start > end
        raise argparse.ArgumentTypeError(f"{_show(text)} is not a range: {exc}") from None


def timeout_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"timeout must be whole seconds, got {_show(text)}") from None
    if not 0 <= value <= 86400:
        raise argparse.ArgumentTypeError(f"timeout out of range: {value} (0..86400)")
    return value


def duration_arg(text: str) -> float:
    try:
        value = parse_duration(text)
    except GridxferError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"duration must be positive: {_show(text)}")
    too_long = MAX_WINDOW.above(value, text)
    if too_long:
        raise argparse.ArgumentTypeError(too_long)
    return value


def path_arg(text: str) -> Path:
    """A file or directory name; an empty one is refused (``Path("")`` is the current
    directory: ``-p ''`` would check the filesystem of wherever Nagios runs the plugin)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty path")
    if "\0" in text:
        raise argparse.ArgumentTypeError(f"{_show(text)}: a path cannot contain NUL")
    return Path(text)


def state_file_arg(text: str) -> Path:
    """A state file the plugin writes: its directory must exist (a typo made the plugin
    create directories, ``/nonexistent/...`` as root) and the path must not be one."""
    path = path_arg(text)
    try:
        if path.is_dir():
            raise argparse.ArgumentTypeError(f"{_show(text)}: is a directory, not a file")
        parent = path.parent
        if not parent.is_dir():
            raise argparse.ArgumentTypeError(f"{_show(text)}: no directory {_show(str(parent))}")
    except OSError as exc:              # a name too long, a loop
        raise argparse.ArgumentTypeError(f"{_show(text)}: {exc.strerror}") from None
    return path


def timestamp_arg(text: str) -> float:
    """Seconds since the epoch (``--at``, to replay a check at a past time)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= LATEST_TIME:
        raise argparse.ArgumentTypeError(f"not a time in seconds since 1970: {_show(text)}")
    return value


def typed(parse: Callable[[str], Any], what: str) -> Callable[[str], Any]:
    """Wrap a ``gridxfer.units`` parser as an argparse type."""
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except (GridxferError, ValueError) as exc:
            raise argparse.ArgumentTypeError(f"{what}: {exc}") from None
    convert.__name__ = what
    return convert
