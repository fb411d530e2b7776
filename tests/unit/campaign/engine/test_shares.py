"""FTS3 activity shares: a link's slots divided by weight between the activities that have
files waiting (shares.py, feed.py)."""
from __future__ import annotations

from gridxfer.campaign.engine.feed import PendingFeed
from gridxfer.campaign.engine.shares import ActivityShares
from gridxfer.campaign.journal import planning, store as journal
from gridxfer.campaign.spec.model import CampaignSpec, FileItem, SourceSpec, TierSpec


def _spec(files, shares=(("Express", 3.0), ("default", 1.0)), activity="default"):
    return CampaignSpec("s", SourceSpec("root://h//s/", files=tuple(files)),
                        (TierSpec("T", ("root://h//d/",)),), activity=activity,
                        activity_shares=shares)


def _feed(tmp_path, spec):
    conn = journal.connect(tmp_path / "j.sqlite", create=True)
    rows = [(f.name, f"root://h//s/{f.name}", 1, "T", None, None) for f in spec.source.files]
    planning.plan(conn, {"name": "s"}, rows)
    return PendingFeed(conn, ["T"], ActivityShares(spec))


FILES = [FileItem(f"d{i}") for i in range(6)] + [FileItem(f"e{i}", activity="Express")
                                                  for i in range(6)]


def test_four_slots_go_three_to_one(tmp_path):
    feed = _feed(tmp_path, _spec(FILES))
    first = [feed.next("T", 0.0)[1] for _ in range(4)]
    assert sorted(first) == ["d0", "e0", "e1", "e2"], first
    assert feed.shares.in_flight("T") == {"Express": 3, "default": 1}
    feed.ended("T", "d0")               # a default slot frees: default gets it back
    assert feed.next("T", 0.0)[1] == "d1"
    feed.ended("T", "e0")
    assert feed.next("T", 0.0)[1] == "e3"


def test_an_idle_activity_leaves_its_slots(tmp_path):
    feed = _feed(tmp_path, _spec([FileItem("d0"), *FILES[6:]]))
    got = [feed.next("T", 0.0)[1] for _ in range(5)]
    assert got[:3] == ["e0", "e1", "e2"] and sorted(got[3:]) == ["d0", "e3"]
    got += [feed.next("T", 0.0)[1] for _ in range(2)]
    assert got[5:] == ["e4", "e5"] and feed.next("T", 0.0) is None


def test_unknown_activity_takes_the_default_share(tmp_path):
    files = [FileItem(f"x{i}", activity="Recall") for i in range(4)] + FILES[6:]
    feed = _feed(tmp_path, _spec(files))
    first = sorted(feed.next("T", 0.0)[1] for _ in range(4))
    assert first == ["e0", "e1", "e2", "x0"]


def test_no_shares_is_id_order(tmp_path):
    feed = _feed(tmp_path, _spec(FILES, shares=()))
    assert feed.shares is None
    assert [feed.next("T", 0.0)[1] for _ in range(7)] == [f"d{i}" for i in range(6)] + ["e0"]
