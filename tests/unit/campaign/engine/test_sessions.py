"""engine/sessions: which servers a campaign connects to ahead, once each, never failing."""
from __future__ import annotations

import pytest

from gridxfer.campaign.engine import sessions
from gridxfer.campaign.spec.model import CampaignSpec, SourceSpec, TierSpec, TokenSpec

SRC = "root://src.invalid:1094//data/"


def spec(*tiers: TierSpec, src: str = SRC, src_token: TokenSpec | None = None) -> CampaignSpec:
    return CampaignSpec(name="c", source=SourceSpec(url=src, token=src_token),
                        destinations=tiers)


class Connecting:
    """An ops object with ``connect``: records what it was asked."""

    def __init__(self, asked: list[str], fail: bool = False) -> None:
        self.asked, self.fail = asked, fail

    def connect(self, url: str) -> None:
        if self.fail:
            raise OSError("no route to host")
        self.asked.append(url)


class Plain:
    """An ops object without ``connect`` (gridftp, a local path)."""


def test_each_server_once_source_first():
    asked: list[str] = []
    sp = spec(TierSpec("T1", ("root://d1.invalid:1094//a/", "root://d1.invalid:1094//b/",
                              "root://d2.invalid:1094//a/")),
              TierSpec("T2", ("root://d2.invalid:1094//c/", "davs://d2.invalid:1094/c/")))
    got = sessions.connect_ahead(sp, lambda url: Connecting(asked))
    assert got == asked == [SRC, "root://d1.invalid:1094//a/", "root://d2.invalid:1094//a/",
                            "davs://d2.invalid:1094/c/"]


def test_servers_with_a_token_of_their_own_are_left_to_the_first_copy():
    """Their ztn login must carry the token the mover writes at its first copy."""
    asked: list[str] = []
    tok = TokenSpec(env="T")
    sp = spec(TierSpec("T1", ("root://plain.invalid//a/", "root://own.invalid//a/"),
                       endpoint_tokens=(("root://own.invalid//a/", tok),)),
              TierSpec("T2", ("root://tier.invalid//a/",), token=tok),
              src_token=tok)
    assert sessions.connect_ahead(sp, lambda url: Connecting(asked)) == [
        "root://plain.invalid//a/"]


def test_local_ends_and_movers_without_connect_are_skipped():
    asked: list[str] = []
    sp = spec(TierSpec("T1", ("gsiftp://g.invalid/a/", "root://r.invalid//a/")),
              src="file:///tmp/data/")
    got = sessions.connect_ahead(
        sp, lambda url: Plain() if url.startswith("gsiftp") else Connecting(asked))
    assert got == asked == ["root://r.invalid//a/"]


@pytest.mark.parametrize("where", ["ops", "connect"])
def test_a_failure_never_fails_the_campaign(where):
    asked: list[str] = []
    sp = spec(TierSpec("T1", ("root://bad.invalid//a/", "root://good.invalid//a/")))

    def ops_for(url: str) -> object:
        if "bad" in url and where == "ops":
            raise ValueError("no mover")
        return Connecting(asked, fail="bad" in url)
    assert sessions.connect_ahead(sp, ops_for) == [SRC, "root://good.invalid//a/"]
