"""Persisted throughput baselines: an exponential moving average and a per-hour-of-day one.

The state is readable JSON (``state.write_json``: atomic, 0600) under
``$GRIDXFER_HOME/checks/``. A damaged or unreadable state file is not fatal: the
baseline starts again and the check says so.

Samples that are themselves a drop (below ``learn_floor`` x baseline) are not learned,
so an outage does not drag the baseline down to the outage level.
"""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from gridxfer.state import read_json, subdir, write_json

Mode = Literal["ewma", "hourly", "auto"]


@dataclass(frozen=True)
class Bucket:
    value: float
    n: int


@dataclass(frozen=True)
class Baseline:
    ewma: Bucket | None = None
    hourly: dict[int, Bucket] = field(default_factory=dict)
    updated: float | None = None

    def reference(self, now: float, mode: Mode = "auto", min_samples: int = 5) -> float | None:
        """The baseline to compare against at ``now``, or None while still learning."""
        hour = hour_of_day(now)
        hourly = self.hourly.get(hour)
        if mode in ("hourly", "auto") and hourly and hourly.n >= min_samples:
            return hourly.value
        if mode in ("ewma", "auto") and self.ewma and self.ewma.n >= min_samples:
            return self.ewma.value
        return None

    def samples(self, now: float, mode: Mode = "auto") -> int:
        hourly = self.hourly.get(hour_of_day(now))
        if mode == "hourly":
            return hourly.n if hourly else 0
        return self.ewma.n if self.ewma else 0

    def learn(self, now: float, value: float, *, alpha: float = 0.1,
              learn_floor: float = 0.5) -> Baseline:
        """A new baseline including ``value`` in the EWMA and in this hour's bucket.

        Each bucket skips a value below ``learn_floor`` x its own value (a drop)."""
        if not math.isfinite(value) or value < 0:
            return self
        hour = hour_of_day(now)
        hourly = dict(self.hourly)
        hourly[hour] = _learn(hourly.get(hour), value, alpha, learn_floor)
        return Baseline(ewma=_learn(self.ewma, value, alpha, learn_floor), hourly=hourly,
                        updated=now)

    def to_json(self) -> dict:
        return {"version": 1, "updated": self.updated,
                "ewma": _bucket_json(self.ewma),
                "hourly": {str(h): _bucket_json(b) for h, b in sorted(self.hourly.items())}}

    @classmethod
    def from_json(cls, obj: object) -> Baseline:
        if not isinstance(obj, dict) or obj.get("version") != 1:
            raise ValueError("not a gridxfer baseline (version 1)")
        hourly = {}
        for key, val in (obj.get("hourly") or {}).items():
            hour = int(key)
            if not 0 <= hour <= 23:
                raise ValueError(f"bad hour {key!r}")
            bucket = _bucket(val)
            if bucket:
                hourly[hour] = bucket
        updated = obj.get("updated")
        return cls(ewma=_bucket(obj.get("ewma")), hourly=hourly,
                   updated=float(updated) if updated is not None else None)


def _learn(bucket: Bucket | None, value: float, alpha: float, floor: float) -> Bucket:
    if bucket is None:
        return Bucket(value, 1)
    if value < floor * bucket.value:
        return bucket
    # average of the first samples while young, then a proper EWMA
    a = max(alpha, 1.0 / (bucket.n + 1))
    return Bucket(bucket.value + a * (value - bucket.value), bucket.n + 1)


def _bucket_json(bucket: Bucket | None) -> dict | None:
    return {"value": bucket.value, "n": bucket.n} if bucket else None


def _bucket(obj: object) -> Bucket | None:
    if obj is None:
        return None
    if not isinstance(obj, dict):
        raise ValueError("bad baseline bucket")
    value, n = float(obj["value"]), int(obj["n"])
    if not math.isfinite(value) or value < 0 or n < 0:
        raise ValueError("bad baseline bucket")
    return Bucket(value, n)


def hour_of_day(now: float) -> int:
    return time.localtime(now).tm_hour


def state_path(kind: str, key: str) -> Path:
    """``$GRIDXFER_HOME/checks/<kind>-<key>.json`` (key sanitised)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", key).strip("._") or "all"
    return subdir("checks") / f"{kind}-{safe[:100]}.json"


def load(path: Path) -> tuple[Baseline, str | None]:
    """The stored baseline, or an empty one and a note saying why it was reset."""
    try:
        return Baseline.from_json(read_json(path)), None
    except FileNotFoundError:
        return Baseline(), None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return Baseline(), f"baseline state reset ({type(exc).__name__})"


def save(path: Path, baseline: Baseline) -> None:
    write_json(path, baseline.to_json())
