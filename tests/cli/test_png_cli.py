"""`campaign report --png` tells what happened (issue 22c): done/failed counts, retries,
exclusions with reasons, interrupts; sessions in flight as whole numbers on an integer axis
(campaign/report/png.py)."""
from __future__ import annotations

from gridxfer.campaign.journal import store
from gridxfer.campaign.report.png import draw, png_data
from gridxfer.cli.main import main
from tests.cli import test_campaign_cli as base

local = base.local      # the fixture: a local test mover and six source files


def test_png_data_and_integer_session_axis(local, capsys):
    spec = base.campaign(local, files='["f0.dat", {name: gone.dat, size: 5}, "f1.dat", '
                                      '"f2.dat", "f3.dat"]')
    base.LocalMover.kill_after = 2                       # one Ctrl-C: interrupted
    assert main(["campaign", "run", "--quiet", str(spec)]) == 4
    base.LocalMover.kill_after = None
    conn = store.connect(store.journal_path("c1"))
    a = f"file://{local}/dst/a/"
    t = conn.execute("SELECT min(started) FROM attempts").fetchone()[0]
    store.add_event(conn, "excluded", ts=t + 0.5, tier="T1", url=a,
                    reason="circuit open: 3 failures in a row (last: connection); cooldown 15s",
                    until=None)
    store.add_event(conn, "readmitted", ts=t + 1.5, tier="T1", url=a)
    conn.execute("INSERT INTO attempts (file_id, tier, endpoint, dst_url, started, ended, status, "
                 "error_class) VALUES (1, 'T1', ?, ?, ?, ?, 'failed', 'timeout')",
                 (a, a + "f0.dat", t + 0.1, t + 0.2))      # f0 failed once before: one retry
    conn.commit()
    conn.close()
    assert main(["campaign", "resume", "c1", "--quiet"]) == 3          # gone.dat fails
    capsys.readouterr()

    d = png_data("c1")
    assert (d.files_total, d.files_done, d.files_failed) == (5, 4, 1)
    assert d.retries == 1 and len(d.interrupts) == 1 and len(d.resumes) == 1
    (ex,) = d.exclusions
    assert (ex.endpoint, ex.reason) == ("a", "circuit open: 3 failures in a row (last: connection)")
    assert ex.end is not None and ex.end - ex.start == 1.0
    assert "4 done, 1 failed of 5 files" in d.headline and "1 exclusions" in d.headline
    assert "1 interrupts" in d.headline
    assert all(isinstance(v, int) for ys in d.timeline["sessions"].values() for v in ys)

    fig = draw(d)
    sessions = fig.axes[1]
    assert all(float(y).is_integer() for y in sessions.get_yticks())
    texts = [x.get_text() for x in fig.texts] + [fig._suptitle.get_text()]
    assert any("excluded" in x and "a: circuit open" in x for x in texts), texts
    assert main(["campaign", "report", "c1", "--png", str(local / "t.png")]) == 0
    assert (local / "t.png").read_bytes()[:4] == b"\x89PNG"


def test_png_headline_counts_tape(gridxfer_home):
    """A tape-backed tier: the headline says how many files are on tape and archiving."""
    from tests.unit.campaign.report.test_tape_report import _journal
    _journal().close()
    d = png_data("tr")
    assert "tape: 6 on tape, 2 archiving, 1 failed" in d.headline, d.headline
    draw(d)
