"""httptpc.modes: pull first, push where a pull was refused (per pair of servers), or the
mode GRIDXFER_HTTP_TPC_MODE forces; the stall timeout's setting. The copies themselves run
on real XrdHttp servers (tests/integration/test_davs_movers.py)."""
from __future__ import annotations

import pytest

from gridxfer.movers.gfal import httptpc

A, B = "davs://a:1/data/f", "davs://b:2/data/.f.gxpart-1"


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(httptpc, "_push_only", set())
    monkeypatch.delenv("GRIDXFER_HTTP_TPC_MODE", raising=False)
    monkeypatch.delenv("GRIDXFER_HTTP_STALL_TIMEOUT", raising=False)


def test_pull_then_push_unless_the_pair_refused_pulls(monkeypatch):
    assert httptpc.modes(A, B) == [httptpc.PULL, httptpc.PUSH]
    httptpc._push_only.add(("a:1", "b:2"))
    assert httptpc.modes(A, B) == [httptpc.PUSH]
    assert httptpc.modes(B, A) == [httptpc.PULL, httptpc.PUSH]     # per direction


@pytest.mark.parametrize("value,expected", [("pull", ["3rd pull"]), ("PUSH", ["3rd push"]),
                                            ("auto", ["3rd pull", "3rd push"]),
                                            ("nonsense", ["3rd pull", "3rd push"])])
def test_the_mode_setting(monkeypatch, value, expected):
    monkeypatch.setenv("GRIDXFER_HTTP_TPC_MODE", value)
    assert httptpc.modes(A, B) == expected


@pytest.mark.parametrize("value,expected", [(None, 120.0), ("8", 8.0), ("0", 1.0), ("x", 120.0)])
def test_stall_timeout(monkeypatch, value, expected):
    if value is not None:
        monkeypatch.setenv("GRIDXFER_HTTP_STALL_TIMEOUT", value)
    assert httptpc.stall_timeout() == expected


def test_only_tokens_given_are_sent_each_for_its_own_server():
    from gridxfer.movers.base import TokenPair
    creds = httptpc._creds(A, B, TokenPair(src="s.t.u", dst=None))
    assert creds == [["davs://a:1/", "s.t.u"]]
