"""Capacity arithmetic of the service challenge: link size, tape drives, disk-buffer time.

Required link = nominal rate x 1.5 (headroom) x 2 (achievable efficiency) x 2 (catch-up after
downtime): 200 MB/s -> 1200 MB/s = 9.6 Gb/s -> a 10 Gb/s link. Tape drives = tape target /
per-drive rate, rounded up: 60 MB/s at 15-20 MB/s per drive -> 3-4 drives. When tape drains
slower than data arrives, a disk buffer fills in buffer / (inflow - outflow).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from gridxfer.errors import UsageError
from gridxfer.units import fmt_duration, parse_byterate

HEADROOM, EFFICIENCY, RECOVERY = 1.5, 2.0, 2.0
STANDARD_LINKS_GBPS = (1, 10, 25, 40, 100, 200, 400, 800)


@dataclass(frozen=True)
class CapacityPlan:
    rate: float                       # nominal bytes/s
    required_rate: float              # bytes/s after the factors
    required_bps: float
    link_gbps: float | None           # smallest standard link that carries it
    drives: tuple[int, int] | None    # (at the fastest drive rate, at the slowest)
    tape_target: float | None
    drive_rate: tuple[float, float] | None
    buffer_bytes: int | None
    fill_s: float | None              # time to fill with tape draining at tape_target
    fill_tape_down_s: float | None    # time to fill with tape stopped
    steps: tuple[str, ...]


def parse_rate_range(text: str) -> tuple[float, float]:
    """``20MB/s`` or ``15-20MB/s`` -> (low, high) bytes/s."""
    text = text.strip()
    if "-" in text[1:]:
        lo, hi = text.split("-", 1)
        unit = hi.lstrip("0123456789. ")
        lo_v = parse_byterate(lo if lo.strip().lstrip("0123456789. ") else lo + unit)
        hi_v = parse_byterate(hi)
        if lo_v > hi_v:
            raise UsageError(f"rate range low > high: {text!r}")
        return lo_v, hi_v
    v = parse_byterate(text)
    return v, v


def _mbs(v: float) -> str:
    return f"{v / 1e6:g} MB/s"


def plan(rate: float, *, tape_target: float | None = None,
         drive_rate: tuple[float, float] | None = None,
         buffer_bytes: int | None = None) -> CapacityPlan:
    if rate <= 0:
        raise UsageError("--rate must be positive")
    required = rate * HEADROOM * EFFICIENCY * RECOVERY
    bps = required * 8
    link = next((g for g in STANDARD_LINKS_GBPS if g * 1e9 >= bps), None)
    steps = [f"link: {_mbs(rate)} x {HEADROOM:g} headroom x {EFFICIENCY:g} efficiency x "
             f"{RECOVERY:g} recovery = {_mbs(required)} = {bps / 1e9:g} Gb/s -> "
             + (f"{link} Gb/s link" if link else "more than the largest standard link")]
    drives = None
    if drive_rate is not None:
        if min(drive_rate) <= 0:
            raise UsageError("--tape-drive-rate must be positive")
        target = tape_target if tape_target is not None else rate
        drives = (math.ceil(target / drive_rate[1] - 1e-9),
                  math.ceil(target / drive_rate[0] - 1e-9))
        per = (_mbs(drive_rate[0]) if drive_rate[0] == drive_rate[1]
               else f"{drive_rate[0] / 1e6:g}-{drive_rate[1] / 1e6:g} MB/s")
        n = f"{drives[0]}" if drives[0] == drives[1] else f"{drives[0]}-{drives[1]}"
        steps.append(f"tape drives: {_mbs(target)} / {per} per drive -> {n} drives")
    fill = fill_down = None
    if buffer_bytes is not None:
        if buffer_bytes <= 0:
            raise UsageError("--buffer must be positive")
        fill_down = buffer_bytes / rate
        if tape_target is not None and tape_target < rate:
            fill = buffer_bytes / (rate - tape_target)
            steps.append(f"disk buffer: {buffer_bytes / 1e12:g} TB / ({_mbs(rate)} in - "
                         f"{_mbs(tape_target)} to tape) = {fill:,.0f} s = {fmt_duration(fill)}")
        elif tape_target is not None:
            steps.append(f"disk buffer: tape ({_mbs(tape_target)}) keeps up with {_mbs(rate)}; "
                         "the buffer does not fill")
        steps.append(f"disk buffer with tape stopped: {buffer_bytes / 1e12:g} TB / {_mbs(rate)} = "
                     f"{fill_down:,.0f} s = {fmt_duration(fill_down)}")
    return CapacityPlan(rate, required, bps, link, drives, tape_target, drive_rate, buffer_bytes,
                        fill, fill_down, tuple(steps))
