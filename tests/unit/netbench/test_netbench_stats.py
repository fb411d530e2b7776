"""Throughput statistics and the CNAF-style frequency distribution table."""
from __future__ import annotations

import pytest

from gridxfer.netbench.stats import Bin, format_table, histogram, nice_width, summarize


def test_summarize():
    s = summarize([900e6, 950e6, 1000e6])
    assert (s.n, s.min, s.avg, s.max) == (3, 900e6, 950e6, 1000e6)
    assert s.stddev == pytest.approx(50e6)
    one = summarize([5.0])
    assert (one.n, one.stddev) == (1, 0.0)
    assert summarize([]).n == 0


@pytest.mark.parametrize("span,bins,width", [
    (100, 10, 10), (95, 10, 10), (1000, 10, 100), (230, 10, 25), (42, 10, 5), (0.3, 10, 0.05),
    (0, 10, 1.0),
])
def test_nice_width(span, bins, width):
    assert nice_width(span, bins) == pytest.approx(width)


def test_histogram_fixed_width_aligned_bins():
    values = [901, 905, 912, 925, 949.9, 950]
    bins = histogram(values, width=25)
    assert bins == [Bin(900, 925, 3), Bin(925, 950, 2), Bin(950, 975, 1)]
    assert sum(b.count for b in bins) == len(values)


def test_histogram_automatic_width_covers_all_samples():
    values = [float(v) for v in range(300, 1001, 7)]
    bins = histogram(values)
    assert sum(b.count for b in bins) == len(values)
    assert bins[0].low <= min(values) and bins[-1].high > max(values)
    widths = {round(b.high - b.low, 9) for b in bins}
    assert len(widths) == 1
    assert histogram([]) == []
    assert histogram([7.0, 7.0]) == [Bin(7.0, 8.0, 2)]


def test_format_table_cnaf_style():
    rows = format_table([Bin(900e6, 925e6, 3), Bin(925e6, 950e6, 1)])
    assert rows[0].split() == ["rate", "(Mbit/s)", "count"]
    assert rows[1].split()[:4] == ["900", "-", "925", "3"]
    assert rows[1].endswith("#" * 40)
    assert rows[2].split()[:4] == ["925", "-", "950", "1"]
    assert rows[2].count("#") == 13
    assert format_table([]) == ["  (no samples)"]
    frac = format_table([Bin(2.5e6, 5e6, 1)])
    assert "2.5 - 5.0" in frac[1]
