"""The GridFTP route's rule (movers/gridftp/mover.py ``choose``): which of the three
implementation movers copies file <-> gsiftp/ftp, by streams, the environment (read at each
copy) and the servers that refused gridxfer's own client. No server needed: the rule only
reads them."""
from __future__ import annotations

import time

import pytest

from gridxfer.movers import get_mover, routes
from gridxfer.movers.base import TransferParams
from gridxfer.movers.gridftp import client
from gridxfer.movers.gridftp.mover import GridFTPMover, choose

L, G, F = "file:///tmp/f", "gsiftp://h:2/d/f", "ftp://h:3/d/f"


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    monkeypatch.delenv("GRIDXFER_GUC_ALWAYS", raising=False)
    monkeypatch.delenv("GRIDXFER_GRIDFTP", raising=False)
    with client._REFUSED_LOCK:
        client._REFUSED.clear()
    yield
    with client._REFUSED_LOCK:
        client._REFUSED.clear()


def _name(src: str, dst: str, streams: int) -> str:
    return choose(src, dst, TransferParams(streams=streams)).load().name


@pytest.mark.parametrize("src,dst,streams,name", [
    (L, G, 1, "gridftp-native"), (G, L, 1, "gridftp-gfal2"),
    (L, F, 1, "gridftp-gfal2"), (F, L, 1, "gridftp-gfal2"),
    (L, G, 2, "globus-url-copy"), (G, L, 4, "globus-url-copy"), (L, F, 2, "globus-url-copy"),
])
def test_rule_by_streams_and_direction(src, dst, streams, name):
    assert isinstance(get_mover(src, dst), GridFTPMover)
    assert _name(src, dst, streams) == name


def test_environment_is_read_at_each_copy(monkeypatch):
    assert _name(L, G, 1) == "gridftp-native"
    monkeypatch.setenv("GRIDXFER_GUC_ALWAYS", "1")
    assert _name(L, G, 1) == _name(G, L, 1) == "globus-url-copy"
    monkeypatch.setenv("GRIDXFER_GUC_ALWAYS", "0")
    monkeypatch.setenv("GRIDXFER_GRIDFTP", "gfal2")
    assert _name(L, G, 1) == "gridftp-gfal2"
    monkeypatch.delenv("GRIDXFER_GRIDFTP")
    assert _name(L, G, 1) == "gridftp-native"


def test_a_server_that_refused_the_client_goes_to_gfal2_for_a_while(monkeypatch):
    with client._REFUSED_LOCK:
        client._REFUSED["h:2"] = (time.monotonic() + client.RETRY_NATIVE, "no delegation")
    assert _name(L, G, 1) == "gridftp-gfal2"
    assert _name(L, "gsiftp://other:2/d/f", 1) == "gridftp-native"
    later = time.monotonic() + client.RETRY_NATIVE + 1
    monkeypatch.setattr(client.time, "monotonic", lambda: later)
    assert _name(L, G, 1) == "gridftp-native"


def test_implementations_are_registered_routes():
    assert {r.load().name for r in routes.GRIDFTP_IMPLEMENTATIONS} == {
        "gridftp-native", "gridftp-gfal2", "globus-url-copy"}
    for route in routes.GRIDFTP_IMPLEMENTATIONS:
        assert route.pairs <= routes.GRIDFTP_LOCAL.pairs and not route.tpc_pairs
