import pytest

from gridxfer.errors import UsageError
from gridxfer.units import parse_bitrate, parse_byterate, parse_duration, parse_size


@pytest.mark.parametrize("text,expected", [
    ("4096", 4096), ("3MB", 3_000_000), ("16MiB", 16 * 2**20), ("50TB", 50 * 10**12),
    ("1.5GB", 1_500_000_000), ("64k", 64_000), (1024, 1024),
])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text,expected", [
    ("1G", 1e9), ("10Gbit", 1e10), ("10Gb/s", 1e10), ("900Mbps", 9e8), ("1000", 1000.0),
])
def test_parse_bitrate(text, expected):
    assert parse_bitrate(text) == expected


@pytest.mark.parametrize("text,expected", [("200MB/s", 2e8), ("20MB/s", 2e7), ("1GiB/s", 2**30)])
def test_parse_byterate(text, expected):
    assert parse_byterate(text) == expected


@pytest.mark.parametrize("text,expected",
                         [("30s", 30), ("18ms", 0.018), ("5m", 300), ("2h", 7200), ("10", 10)])
def test_parse_duration(text, expected):
    assert parse_duration(text) == pytest.approx(expected)


@pytest.mark.parametrize("bad", ["", "abc", "3XB", "-1", "1.2.3"])
def test_bad_inputs_raise_usage_error(bad):
    for fn in (parse_size, parse_duration):
        with pytest.raises(UsageError):
            fn(bad)
