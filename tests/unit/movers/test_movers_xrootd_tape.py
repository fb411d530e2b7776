"""movers/xrootd/tape.py: EOS-CTA query prepare JSON -> TapeState, and cut answers."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from gridxfer.errors import TransferError
from gridxfer.movers.tape import Residency
from gridxfer.movers.xrootd.tape import XRootDTapeOps, state_of

OK = SimpleNamespace(ok=True)
URL = "root://h:1//data/f"


@pytest.mark.parametrize("entry,residency", [
    ({"path_exists": True, "online": True}, Residency.DISK_ONLY),
    ({"path_exists": True, "online": True, "on_tape": True}, Residency.ON_TAPE),
    ({"path_exists": True, "on_tape": True}, Residency.TAPE_ONLY),
    ({"path_exists": False, "on_tape": False, "online": False,
      "error_text": "USER ERROR: file does not exist"}, Residency.MISSING),
    ({"path_exists": True, "on_tape": True, "error_text": "retrieve failed"}, Residency.ERROR),
    ({"path_exists": True}, Residency.ERROR),
])
def test_state_of(entry, residency):
    state = state_of(URL, {"path": "/data/f", **entry})
    assert state.residency is residency
    assert bool(state.error) or residency is not Residency.ERROR


def test_parse_matches_paths_and_ignores_bytes_after_the_nul():
    body = json.dumps({"request_id": "r", "responses": [
        {"path": "/data/f", "path_exists": True, "on_tape": True, "online": True,
         "requested": True}]}).encode() + b"\x00U"
    got = XRootDTapeOps._parse("root://h:1", [URL, "root://h:1//data/g"], OK, body)
    assert got[URL].residency is Residency.ON_TAPE and got[URL].requested
    assert got["root://h:1//data/g"].residency is Residency.ERROR


@pytest.mark.parametrize("body", [b"No information available.\x00",
                                  b'{"request_id":"r","resp***response has been truncated***'])
def test_a_cut_answer_is_none(body):
    assert XRootDTapeOps._parse("root://h:1", [URL], OK, body) is None


def test_an_answer_that_is_not_tape_state_is_one_error():
    with pytest.raises(TransferError, match="not tape state"):
        XRootDTapeOps._parse("root://h:1", [URL], OK, b"Request r not queued.\x00")
