"""The frames between the campaign process and its relay helpers (movers/xrootd/relaywire.py)
and the counts read from the environment (relaypool.procs, relaynative.channels)."""
from __future__ import annotations

import io

import pytest

pytest.importorskip("XRootD")

from gridxfer.movers.base import TokenPair  # noqa: E402
from gridxfer.movers.xrootd import relaynative, relaypool, relaywire as wire  # noqa: E402


def test_frames_round_trip_in_order_and_a_torn_last_frame_is_the_end():
    buf = io.BytesIO()
    msgs = [wire.Request(1, "root://a//f", "root://b//f", True, "0a0b0c0d", 60.0,
                         TokenPair(src="s", dst="d")),
            wire.Cancel(1),
            wire.Outcome(1, 4096, "0a0b0c0d", "0a0b0c0d").seen(0.02, True),
            wire.Outcome(2, error=("exists", "exists: root://b//f: file exists"))]
    for m in msgs:
        wire.write(buf, m)
    whole = buf.getvalue()
    got = io.BytesIO(whole)
    assert [wire.read(got) for _ in msgs] == msgs
    assert wire.read(got) is None
    assert wire.read(io.BytesIO(whole[:-3])) is not None          # the first frames are whole
    torn = io.BytesIO(whole[: len(whole) - 3])
    for _ in msgs[:-1]:
        assert wire.read(torn) is not None
    assert wire.read(torn) is None


def test_a_request_never_shows_its_tokens():
    req = wire.Request(7, "root://a//f", "root://b//f", False, None, 60.0,
                       TokenPair(src="eyJsecret", dst="eyJsecret"))
    assert "eyJsecret" not in repr(req) and "eyJsecret" not in str(req)


@pytest.mark.parametrize(("read", "var", "default", "cases"), [
    (relaypool.procs, relaypool.PROCS_VAR, 2, [("0", 0), ("3", 3), ("99", 16), ("-1", 0)]),
    (relaynative.channels, relaynative.CHANNELS_VAR, 1,
     [("1", 1), ("4", 4), ("99", 16), ("0", 1)])], ids=["helpers", "channels"])
def test_counts_come_from_the_environment_within_bounds(monkeypatch, read, var, default, cases):
    monkeypatch.delenv(var, raising=False)
    assert read() == default
    for value, n in [*cases, ("two", default)]:
        monkeypatch.setenv(var, value)
        assert read() == n, value
