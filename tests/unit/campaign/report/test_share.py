from gridxfer.campaign.journal import store as journal
from gridxfer.campaign.report.share import endpoint_share, render_share

MB = 1_000_000
FAST, SLOW = "root://fast//d/", "root://slow//d/"


def add(conn, i, ep, started, ended, nbytes, status="ok"):
    conn.execute("INSERT INTO files (id, name, src_url, size, tier) VALUES (?, ?, ?, ?, 'T1')",
                 (i, f"f{i}", f"file:///s/f{i}", nbytes))
    conn.execute("INSERT INTO attempts (file_id, tier, endpoint, dst_url, started, ended, bytes,"
                 " status) VALUES (?, 'T1', ?, ?, ?, ?, ?, ?)",
                 (i, ep, ep + f"f{i}", started, ended, nbytes, status))


def test_blackhole_is_visible(gridxfer_home):
    conn = journal.connect(journal.journal_path("bh"), create=True)
    # fast: 8 files of 10 MB one after the other in 0..8 s (one session)
    for i in range(8):
        add(conn, i, FAST, 1000.0 + i, 1001.0 + i, 10 * MB)
    # slow: 3 sessions for the whole 8 s, 1 MB each; one failed attempt too
    for i in range(8, 11):
        add(conn, i, SLOW, 1000.0, 1008.0, 1 * MB)
    add(conn, 11, SLOW, 1000.0, 1002.0, 0, status="failed")
    rep = endpoint_share(conn, bins=4)
    by = {e.endpoint: e for e in rep.endpoints}
    assert rep.seconds == 8.0 and len(rep.bins) == 4
    assert by[FAST].files == 8 and by[FAST].bytes == 80 * MB and not by[FAST].blackhole
    assert by[SLOW].files == 3 and by[SLOW].failures == 1 and by[SLOW].blackhole
    assert abs(by[SLOW].share_sessions - 26 / 34) < 1e-9
    assert abs(by[FAST].rate - 10 * MB) < 1e-6
    first = rep.bins[0]
    assert first.files == {FAST: 1} and rep.bins[-1].files == {FAST: 3, SLOW: 3}
    assert first.sessions == {FAST: 1.0, SLOW: 4.0}
    assert first.bytes[FAST] == 20 * MB and first.bytes[SLOW] == 750_000
    assert rep.blackholes == [SLOW]
    text = render_share(rep)
    assert "BLACK HOLE" in text and "1 failed attempts" in text and "0.0s-2.0s" in text
    assert set(rep.to_dict()) == {"t0", "seconds", "endpoints", "bins"}


def test_balanced_pool_has_no_blackhole_and_running_attempts_count(gridxfer_home):
    conn = journal.connect(journal.journal_path("ok"), create=True)
    add(conn, 1, FAST, 0.0, 4.0, 40 * MB)
    add(conn, 2, SLOW, 0.0, None, 0, status="active")
    rep = endpoint_share(conn, bins=2, now=4.0)
    by = {e.endpoint: e for e in rep.endpoints}
    assert by[SLOW].session_seconds == 4.0 and by[SLOW].files == 0
    assert not by[FAST].blackhole
    assert endpoint_share(conn, tier="T2").endpoints == ()
    assert render_share(endpoint_share(conn, tier="T2")) == "no attempts yet"
