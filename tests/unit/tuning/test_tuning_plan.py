"""Capacity arithmetic of `tune plan`."""
from __future__ import annotations

import pytest

from gridxfer.errors import UsageError
from gridxfer.tuning.plan import parse_rate_range, plan


def test_link_200mbs_needs_10g():
    p = plan(200e6)
    assert p.required_rate == 1200e6 and p.required_bps == 9.6e9 and p.link_gbps == 10
    assert (
        "200 MB/s x 1.5 headroom x 2 efficiency x 2 recovery = 1200 MB/s = 9.6 Gb/s -> 10 Gb/s"
        in p.steps[0]
    )


def test_tape_drives_3_to_4():
    p = plan(200e6, tape_target=60e6, drive_rate=parse_rate_range("15-20MB/s"))
    assert p.drives == (3, 4)
    assert plan(60e6, drive_rate=parse_rate_range("20MB/s")).drives == (3, 3)


def test_buffer_time_to_full():
    p = plan(200e6, tape_target=60e6, buffer_bytes=50 * 10**12)
    assert p.fill_s == pytest.approx(50e12 / 140e6) and p.fill_tape_down_s == 250_000
    keeps_up = plan(50e6, tape_target=60e6, buffer_bytes=10**12)
    assert keeps_up.fill_s is None and any("does not fill" in s for s in keeps_up.steps)


def test_bigger_rates_pick_bigger_links():
    assert (
        plan(1000e6).link_gbps == 100 and plan(50e6).link_gbps == 10 and plan(20e6).link_gbps == 1
    )


def test_rate_ranges():
    assert parse_rate_range("15-20MB/s") == (15e6, 20e6)
    assert parse_rate_range("15MB/s-20MB/s") == (15e6, 20e6)
    with pytest.raises(UsageError):
        parse_rate_range("20-15MB/s")
