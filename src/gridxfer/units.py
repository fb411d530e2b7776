"""Parsing and formatting of sizes, rates and durations, shared by every module.

Sizes: ``4096``, ``64KB``, ``3MB``, ``16MiB``, ``50TB`` (KB/MB/... are decimal,
KiB/MiB/... binary). Bit rates: ``1G``, ``10Gbit``, ``10Gb/s``, ``900Mbps``.
Byte rates: ``200MB/s``. Durations: ``30s``, ``18ms``, ``5m``, ``2h``, ``1d``.
"""
from __future__ import annotations

import math
import re

from gridxfer.errors import UsageError

# Limits of what can be represented, not policy: a size must fit SQLite's INTEGER (the
# journal stores it), a duration must fit every timer (threading waits stop at ~292 years).
MAX_SIZE = 2**63 - 1
MAX_DURATION = 10 * 365 * 86400.0
MAX_RATE = 1e18

_DEC = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "p": 10**15}
_BIN = {"ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40, "pi": 2**50}
_NUM = r"(\d+(?:\.\d+)?|\.\d+)"

_SIZE_RE = re.compile(_NUM + r"\s*([kmgtp]i?)?b?", re.I | re.A)
_BITRATE_RE = re.compile(_NUM + r"\s*([kmgt])?\s*(?:bit/s|bits/s|bps|b/s|bit|b)?", re.I | re.A)
_BYTERATE_RE = re.compile(_NUM + r"\s*([kmgt]i?)?\s*(?:b/s|bps|byte/s|bytes/s)", re.I | re.A)
_DUR_RE = re.compile(_NUM + r"\s*(us|ms|s|sec|m|min|h|d)?", re.I | re.A)
_DUR = {"us": 1e-6, "ms": 1e-3, "": 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0,
        "h": 3600.0, "d": 86400.0}


def _mult(prefix: str | None) -> int:
    p = (prefix or "").lower()
    return _BIN[p] if p in _BIN else _DEC[p]


def parse_size(text: str | int | float) -> int:
    """Bytes from ``'3MB'``, ``'16MiB'`` or a plain number."""
    if isinstance(text, bool):
        raise UsageError(f"not a size: {text!r}")
    if isinstance(text, (int, float)):
        value = _finite(text, "size")
    else:
        m = _SIZE_RE.fullmatch(str(text).strip())
        if not m:
            raise UsageError(f"not a size: {_show(text)} (try 4096, 3MB, 16MiB)")
        value = _finite(float(m.group(1)), "size", text) * _mult(m.group(2))
    if value < 0:
        raise UsageError(f"size must not be negative: {_show(text)}")
    if value > MAX_SIZE:
        raise UsageError(f"size is too large: {_show(text)} (at most {MAX_SIZE} bytes)")
    return int(text) if isinstance(text, int) else int(value)


def parse_bitrate(text: str | int | float) -> float:
    """Bits per second from ``'1G'``, ``'10Gbit'``, ``'900Mbps'``."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return _rate(_finite(text, "bit rate"), text)
    m = _BITRATE_RE.fullmatch(str(text).strip())
    if not m:
        raise UsageError(f"not a bit rate: {_show(text)} (try 1G, 10Gbit, 900Mbps)")
    return _rate(_finite(float(m.group(1)), "bit rate", text) * _DEC[(m.group(2) or "").lower()],
                 text)


def parse_byterate(text: str | int | float) -> float:
    """Bytes per second from ``'200MB/s'`` (a plain number is bytes/s)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return _rate(_finite(text, "byte rate"), text)
    m = _BYTERATE_RE.fullmatch(str(text).strip())
    if not m:
        raise UsageError(f"not a byte rate: {_show(text)} (try 200MB/s, 20MB/s)")
    return _rate(_finite(float(m.group(1)), "byte rate", text) * _mult(m.group(2)), text)


def parse_duration(text: str | int | float) -> float:
    """Seconds from ``'30s'``, ``'18ms'``, ``'5m'``; a plain number is seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = _finite(text, "duration")
    else:
        m = _DUR_RE.fullmatch(str(text).strip())
        if not m:
            raise UsageError(f"not a duration: {_show(text)} (try 30s, 18ms, 5m, 2h)")
        value = _finite(float(m.group(1)), "duration", text) * _DUR[(m.group(2) or "").lower()]
    if value < 0:
        raise UsageError(f"duration must not be negative: {_show(text)}")
    if value > MAX_DURATION:
        raise UsageError(f"duration is too long: {_show(text)} (at most 10 years)")
    return value


def _show(raw: object) -> str:
    """A user's value for a one-line message: repr, shortened when it is huge."""
    text = repr(raw) if not isinstance(raw, int) or isinstance(raw, bool) else str(raw)
    return text if len(text) <= 40 else f"{text[:20]}...{text[-8:]} ({len(text)} chars)"


def _finite(value: int | float, what: str, raw: object = None) -> float:
    """``value`` as a float; inf, NaN and numbers beyond a float are refused."""
    try:
        out = float(value)
    except OverflowError:       # an int beyond any float
        out = math.inf
    if math.isnan(out) or (math.isinf(out) and isinstance(value, float) and raw is None):
        raise UsageError(f"not a {what}: {_show(value)}")      # YAML's .nan / .inf
    if math.isinf(out):
        raise UsageError(f"{what} is too large: {_show(value if raw is None else raw)}")
    return out


def _rate(value: float, raw: object) -> float:
    if value < 0:
        raise UsageError(f"a rate must not be negative: {_show(raw)}")
    if value > MAX_RATE:
        raise UsageError(f"rate is too large: {_show(raw)}")
    return value


def fmt_bytes(n: float) -> str:
    """Human size with decimal units: ``1.50 GB``."""
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if abs(n) < 1000 or unit == "PB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1000.0
    raise AssertionError("unreachable")


def fmt_rate(bytes_per_s: float) -> str:
    """Human byte rate: ``112.3 MB/s``."""
    return f"{bytes_per_s / 1e6:.1f} MB/s"


def fmt_duration(seconds: float) -> str:
    """``1h02m03s`` / ``4m05s`` / ``12.3s``."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"
