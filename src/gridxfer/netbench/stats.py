"""Summary statistics and frequency distributions of throughput samples.

The distribution follows the CNAF service-challenge tables: fixed-width rate bins
(Mbit/s) with the number of samples that fell in each, e.g. ``900-925  7``.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

_NICE = (1, 2, 2.5, 5, 10)


@dataclass(frozen=True)
class Summary:
    n: int
    min: float
    avg: float
    max: float
    stddev: float       # sample standard deviation (0 for n < 2)


@dataclass(frozen=True)
class Bin:
    low: float          # inclusive
    high: float         # exclusive (the last bin is inclusive)
    count: int


def summarize(values: list[float] | tuple[float, ...]) -> Summary:
    if not values:
        return Summary(0, 0.0, 0.0, 0.0, 0.0)
    vals = list(values)
    return Summary(len(vals), min(vals), statistics.fmean(vals), max(vals),
                   statistics.stdev(vals) if len(vals) > 1 else 0.0)


def nice_width(span: float, target_bins: int = 10) -> float:
    """A 1/2/2.5/5 x 10^k bin width giving about ``target_bins`` bins over ``span``."""
    if span <= 0:
        return 1.0
    raw = span / target_bins
    exp = 10 ** math.floor(math.log10(raw))
    for step in _NICE:
        if step * exp >= raw:
            return step * exp
    return 10 * exp


def histogram(values: list[float] | tuple[float, ...], width: float | None = None,
              target_bins: int = 10) -> list[Bin]:
    """Fixed-width bins aligned to multiples of ``width``, covering min..max."""
    if not values:
        return []
    lo, hi = min(values), max(values)
    width = width or nice_width(hi - lo, target_bins)
    start = math.floor(lo / width) * width
    nbins = max(1, int(math.floor((hi - start) / width)) + 1)
    counts = [0] * nbins
    for v in values:
        counts[min(nbins - 1, int((v - start) // width))] += 1
    return [Bin(start + i * width, start + (i + 1) * width, c) for i, c in enumerate(counts)]


def format_table(bins: list[Bin], unit: str = "Mbit/s", scale: float = 1e6,
                 bar: int = 40) -> list[str]:
    """The CNAF-style table: ``rate bin | count | bar``."""
    if not bins:
        return ["  (no samples)"]
    top = max(b.count for b in bins) or 1
    digits = 0 if all(float(b.low / scale).is_integer() and float(b.high / scale).is_integer()
                      for b in bins) else 1
    rows = [f"  {'rate (' + unit + ')':>21}  {'count':>5}"]
    for b in bins:
        label = f"{b.low / scale:.{digits}f} - {b.high / scale:.{digits}f}"
        rows.append(f"  {label:>21}  {b.count:>5}  {'#' * round(bar * b.count / top)}")
    return rows
