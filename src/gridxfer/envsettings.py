"""The ``GRIDXFER_*`` settings read from the environment that take a number, a quantity with
its unit (a duration, a size) or one of a few words: each one's default and bounds (or
words) in one table, one reader and one check.

``value(name)`` is what the code reads, often in a worker thread at each copy: a value
that is not a number is the default and one out of bounds is clamped, so a reader never
raises mid-campaign. ``check()`` runs once when a command starts (``cli/main``) and
refuses a bad value with one line and exit 2 before anything runs, so a typo in a site's
environment is never silently replaced by a default. The meaning of each variable:
docs/ARCHITECTURE.md, "Environment variables".
"""
from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gridxfer.errors import UsageError
from gridxfer.limits import MAX_SIZE, MAX_WINDOW, Limit
from gridxfer.units import parse_duration, parse_size


@dataclass(frozen=True)
class Setting:
    name: str
    default: float
    low: float
    high: float = math.inf
    whole: bool = False             # a count (int), else a number of seconds or ms (float)

    def parse(self, raw: str) -> float:
        """The value of ``raw``; ValueError (one line naming the variable) if it is not a
        finite number of this kind within the bounds."""
        text = raw.strip()
        try:
            number: float = int(text) if self.whole else float(text)
        except ValueError:
            kind = "a whole number" if self.whole else "a number"
            raise ValueError(f"{self.name}={raw!r}: not {kind} "
                             f"(default {_show(self.default)})") from None
        if not math.isfinite(number) or not self.low <= number <= self.high:
            top = "" if self.high == math.inf else f" and {_show(self.high)}"
            word = "between" if top else "at least"
            raise ValueError(f"{self.name}={raw!r}: must be {word} {_show(self.low)}{top}")
        return number


def _show(x: float) -> str:
    return str(int(x)) if x == int(x) else str(x)


SETTINGS = {s.name: s for s in (
    Setting("GRIDXFER_XRD_STALL_TIMEOUT", 120, 1),
    Setting("GRIDXFER_HTTP_STALL_TIMEOUT", 120, 1),
    Setting("GRIDXFER_XRD_CHECKSUM_TIMEOUT", 300, 1),
    # xrootd runs ``xrootd.chksum max`` checksum jobs at once (4 by default) and queues 3 x
    # as many; past that a request waits 30 s (movers/xrootd/cksum.py, gfal/digestgate.py)
    Setting("GRIDXFER_XRD_CHECKSUM_SLOTS", 4, 1, 64, whole=True),
    Setting("GRIDXFER_HTTP_DIGEST_SLOTS", 4, 1, 64, whole=True),
    Setting("GRIDXFER_XRD_NEAR_MS", 5, 0),
    Setting("GRIDXFER_XRD_SMALL_CHANNELS", 1, 1, 16, whole=True),
    Setting("GRIDXFER_RELAY_PROCS", 2, 0, 16, whole=True),
    Setting("GRIDXFER_DEMO_FILES", 16, 1, 100_000, whole=True),
)}


@dataclass(frozen=True)
class Quantity:
    """A setting written with its unit (``30s``, ``64MB``), read by a ``gridxfer.units``
    parser: more than 0 and at most ``limit``."""
    name: str
    default: str
    read: Callable[[str], float]
    limit: Limit

    def parse(self, raw: str) -> float:
        """The value of ``raw``; UsageError (one line naming the variable) if it is not a
        quantity of this kind, or not more than 0, or above the limit."""
        text = raw.strip()
        try:
            number = self.read(text)
        except UsageError as exc:
            raise UsageError(f"{self.name}={raw!r}: {exc}") from None
        if number <= 0:
            raise UsageError(f"{self.name}={raw!r}: must be more than 0 "
                             f"(default {self.default})")
        if self.limit.above(number, text):
            raise UsageError(f"{self.name}={raw!r}: above the limit {self.limit.shown} "
                             f"({self.limit.why})")
        return number


QUANTITIES = {q.name: q for q in (
    Quantity("GRIDXFER_PROGRESS_EVERY", "30s", parse_duration, MAX_WINDOW),
    Quantity("GRIDXFER_DEMO_SIZE", "64MB", lambda t: float(parse_size(t)), MAX_SIZE),
)}


# the word-valued ones: what each takes (lower case; the readers treat another word as the
# default, so ``check`` refuses it: a forced mode mistyped must not pass as "auto")
CHOICES: dict[str, tuple[str, ...]] = {
    "GRIDXFER_HTTP_TPC_MODE": ("auto", "pull", "push"),
    "GRIDXFER_GRIDFTP": ("native", "gfal2"),
    "GRIDXFER_XRD_NATIVE": ("0", "1"),
    "GRIDXFER_GUC_ALWAYS": ("0", "1", "no", "yes", "false", "true"),
    "GRIDXFER_WAN_EMULATION": ("netem", "delayline"),
    "GRIDXFER_DEMO_LOCAL": ("0", "1"),
}

# the ones of a form of their own: (the pattern, the form in words)
FORMS: dict[str, tuple[re.Pattern[str], str]] = {
    # a suffix of every namespace and link name the netns grid makes (IFNAMSIZ: 15 chars)
    "GRIDXFER_NS_TAG": (re.compile(r"[a-z0-9]{1,8}"), "1-8 chars of [a-z0-9]"),
}


def value(name: str) -> float:
    """``$name`` as its setting reads it: unset or not a number, the default; out of
    bounds, the nearest bound. Never raises (``check`` refused a bad value at start)."""
    s = SETTINGS[name]
    raw = os.environ.get(name, "").strip()
    if not raw:
        return s.default
    try:
        return s.parse(raw)
    except ValueError:
        try:
            number = float(raw)
        except ValueError:
            return s.default
        return s.default if math.isnan(number) else min(max(number, s.low), s.high)


def count(name: str) -> int:
    """``value`` of a whole-number setting, as an int."""
    return int(value(name))


def quantity(name: str) -> float:
    """``$name`` as its ``QUANTITIES`` entry reads it: unset or bad, the default. Never
    raises (``check`` refused a bad value at start)."""
    q = QUANTITIES[name]
    raw = os.environ.get(name, "").strip()
    try:
        return q.parse(raw or q.default)
    except UsageError:
        return q.parse(q.default)


def check(environ: Mapping[str, str] | None = None) -> None:
    """UsageError (exit 2) for the first GRIDXFER_* variable of ``SETTINGS``,
    ``QUANTITIES``, ``CHOICES`` or ``FORMS`` that is set to a value it does not take;
    nothing if every one is unset or good."""
    env = os.environ if environ is None else environ
    for name, s in SETTINGS.items():
        raw = env.get(name, "")
        if raw.strip():
            try:
                s.parse(raw)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
    for name, words in CHOICES.items():
        raw = env.get(name, "")
        if raw.strip() and raw.strip().lower() not in words:
            raise UsageError(f"{name}={raw!r}: must be one of {', '.join(words)}")
    for name, q in QUANTITIES.items():
        raw = env.get(name, "")
        if raw.strip():
            q.parse(raw)
    for name, (pattern, form) in FORMS.items():
        raw = env.get(name, "")
        if raw and not pattern.fullmatch(raw):
            raise UsageError(f"{name}={raw!r}: must be {form}")


__all__ = ["CHOICES", "FORMS", "QUANTITIES", "SETTINGS", "Quantity", "Setting", "check",
           "count", "quantity", "value"]
