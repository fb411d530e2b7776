"""HttpOps.checksum asks again after a server error. XrdHttp 5.5.3 answers a checksum with
HTTP 500 now and then under load (the bench's gfal-copy rounds failed on it) but not on
demand, so the server's answer is stood in for here; the checksum itself is tested on
the real XrdHttp (tests/integration/test_davs_movers.py, tests/contract/test_movers.py)."""
from __future__ import annotations

import gfal2
import pytest

from gridxfer.errors import TransferError
from gridxfer.movers.gfal import davs


class _Answers:
    def __init__(self, *answers):
        self.answers, self.asked = list(answers), 0

    def checksum(self, url, algorithm):
        self.asked += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setattr(davs, "CHECKSUM_BACKOFF", 0.0)

    def use(*answers):
        ctx = _Answers(*answers)
        monkeypatch.setattr(davs.HttpOps, "_ctx", lambda self, url: ctx)
        return ctx
    return use


E500 = gfal2.GError("DESTINATION CHECKSUM HTTP 500 : Unexpected server error: 500", 5)


def test_a_500_is_asked_again_and_the_answer_zero_padded(server):
    ctx = server(E500, E500, "790079")
    assert davs.HttpOps().checksum("davs://h:1/data/f") == "00790079" and ctx.asked == 3


def test_persistent_500s_are_the_error(server):
    ctx = server(E500, E500, E500, "00000001")
    with pytest.raises(TransferError, match="HTTP 500"):
        davs.HttpOps().checksum("davs://h:1/data/f")
    assert ctx.asked == davs.CHECKSUM_TRIES


def test_a_403_or_404_is_not_asked_again(server):
    ctx = server(gfal2.GError("HTTP 403 : Permission refused", 13), "00000001")
    with pytest.raises(TransferError) as err:
        davs.HttpOps().checksum("davs://h:1/data/f")
    assert err.value.error_class.value == "auth" and ctx.asked == 1
