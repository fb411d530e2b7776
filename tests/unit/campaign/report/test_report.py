"""Report from a hand-made journal: per-group stats, histogram, timeline, PNG."""
from __future__ import annotations

import math

import numpy as np
import pytest

from gridxfer.campaign.journal import planning, store as journal
from gridxfer.campaign.report.png import write_png
from gridxfer.campaign.report.summary import build_report, nice_width, overlap, timeline

A, B = "root://a:1//d/", "root://b:1//d/"
MB = 1_000_000


@pytest.fixture
def jn(gridxfer_home):
    conn = journal.connect(journal.journal_path("r1"), create=True)
    planning.plan(conn, {"name": "r1", "state": "partial"},
                 [(f"f{i}", f"root://s//f{i}", 10 * MB, "T1", None) for i in range(4)])
    # f0..f2 done: A at 10 and 20 MB/s, B at 30 MB/s; f3 failed twice on B
    rows = [(1, 1, A, 0.0, 1.0, 10 * MB, "ok", None), (2, 2, A, 0.0, 0.5, 10 * MB, "ok", None),
            (3, 3, B, 1.0, 1 + 1 / 3, 10 * MB, "ok", None),
            (4, 4, B, 0.0, 2.0, 0, "failed", "connection"),
            (5, 4, B, 2.0, 3.0, 0, "failed", "timeout")]
    t0 = 1000.0
    for aid, fid, ep, s, e, b, st, ec in rows:
        conn.execute("INSERT INTO attempts (id, file_id, tier, endpoint, dst_url, started, ended, "
                     "bytes, rate, status, error_class) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                     (aid, fid, "T1", ep, ep + f"f{fid}", t0 + s, t0 + e, b,
                      b / (e - s), st, ec))
    conn.execute("UPDATE files SET state='done', endpoint=CASE id WHEN 3 THEN ? ELSE ? END "
                 "WHERE id < 4", (B, A))
    conn.execute("UPDATE files SET state='failed', endpoint=?, error_class='timeout', "
                 "error_msg='too slow' WHERE id = 4", (B,))
    conn.close()
    return "r1"


def test_groups_and_histogram(jn):
    rep = build_report(jn)
    assert (rep.files_total, rep.files_done, rep.files_failed) == (4, 3, 1)
    assert rep.bytes_done == 30 * MB and rep.seconds == pytest.approx(3.0)
    (link,) = rep.links
    assert link.transfers == 3 and link.files_failed == 1
    assert link.mean_rate == pytest.approx(20 * MB)
    assert link.stddev_rate == pytest.approx(math.sqrt(200 / 3) * MB)
    assert (link.min_rate, link.max_rate) == (pytest.approx(10 * MB), pytest.approx(30 * MB))
    assert link.failures == {"connection": 1, "timeout": 1}
    eps = {g.key: g for g in rep.endpoints}
    assert eps[A].files_done == 2 and eps[A].mean_rate == pytest.approx(15 * MB)
    assert eps[B].files_done == 1 and eps[B].files_failed == 1
    assert sum(b.count for b in rep.histogram) == 3
    assert all(b.high - b.low == pytest.approx(5 * MB) for b in rep.histogram)
    assert [b.count for b in rep.histogram if b.count] == [1, 1, 1]
    assert rep.failed_files[0]["error_msg"] == "too slow"
    assert {e.endpoint for e in rep.share.endpoints} == {A, B}


def test_overlap_integral():
    s, e = np.array([0.0, 1.0]), np.array([2.0, 3.0])
    w = np.array([1.0, 2.0])
    got = overlap(s, e, w, np.array([0.0, 1.0, 2.0, 3.0, 4.0]))
    assert got.tolist() == [0.0, 1.0, 4.0, 6.0, 6.0]


def test_timeline_conserves_bytes(jn):
    tl = timeline(jn, points=60)
    width = tl["t"][1] - tl["t"][0]
    assert sum(tl["aggregate"]) * width == pytest.approx(30 * MB, rel=1e-6)
    assert set(tl["links"]) == {"T1"} and set(tl["sessions"]) == {"a", "b"}   # names


def test_png(jn, tmp_path):
    out = write_png(jn, tmp_path / "t.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_nice_width():
    assert nice_width(100, 10) == 10
    assert nice_width(33, 10) == 5
    assert nice_width(0.7, 10) == pytest.approx(0.1)
