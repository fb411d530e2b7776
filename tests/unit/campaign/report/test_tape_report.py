"""status and report on a tape-backed campaign: the archive backlog, the time to tape as a
distribution, the tape rate, staging; the PNG draws the disk and tape curves. The journal
is written by hand here, so every figure is known independently of the code."""
from __future__ import annotations

import json

from click.testing import CliRunner

from gridxfer.campaign.journal import planning, store as journal
from gridxfer.campaign.report import summary, tape
from gridxfer.campaign.report.status import campaign_status
from gridxfer.campaign.spec.model import (CampaignSpec, SourceSpec, StagingSpec, TierSpec,
                                          spec_to_dict)
from gridxfer.cli.main import cli

NOW = 1_000_000.0


def _journal():
    spec = CampaignSpec("tr", SourceSpec("root://s.invalid//s/", bring_online=StagingSpec(60.0)),
                        (TierSpec("T1", ("root://t.invalid//t/",), archive_timeout=3600.0),
                         TierSpec("T2", ("root://d.invalid//d/",))))
    conn = journal.connect(journal.journal_path("tr"), create=True)
    planning.plan(conn, {"name": "tr", "spec": json.dumps(spec_to_dict(spec))},
                 [(f"f{i}", f"root://s.invalid//s/f{i}", 1_000_000, t, None)
                  for i in range(10) for t in ("T1", "T2")])
    # T1: f0-f5 on tape after 10..60 s; f6, f7 archiving since NOW-100 / NOW-50; f8 timed out
    for i in range(6):
        conn.execute("UPDATE files SET state='done', copied=?, on_tape=? WHERE name=? AND "
                     "tier='T1'", (NOW - 300 + i, NOW - 300 + i + 10 * (i + 1), f"f{i}"))
    conn.execute("UPDATE files SET state='archiving', copied=? WHERE name='f6' AND tier='T1'",
                 (NOW - 100,))
    conn.execute("UPDATE files SET state='archiving', copied=? WHERE name='f7' AND tier='T1'",
                 (NOW - 50,))
    conn.execute("UPDATE files SET state='failed', error_class='archive_timeout' "
                 "WHERE name='f8' AND tier='T1'")
    conn.execute("UPDATE files SET stage_requested=?, staged=? WHERE name IN ('f0', 'f1')",
                 (NOW - 400, NOW - 390))
    conn.execute("UPDATE files SET state='staging', stage_requested=? WHERE name='f9'",
                 (NOW - 10,))
    conn.execute("INSERT INTO attempts (file_id, tier, endpoint, dst_url, started, ended, "
                 "bytes, rate, status) SELECT id, tier, 'root://t.invalid//t/', "
                 "'root://t.invalid//t/' || name, copied - 1, copied, size, size, 'ok' "
                 "FROM files WHERE copied IS NOT NULL")
    return conn


def test_tape_report_figures(gridxfer_home):
    rep = tape.tape_report(_journal(), NOW)
    (t1,) = rep.tiers                                   # T2 is a disk tier
    assert (t1.tier, t1.backlog, t1.backlog_bytes, t1.oldest) == ("T1", 2, 2_000_000, 100.0)
    assert (t1.on_tape, t1.on_tape_bytes, t1.failed) == (6, 6_000_000, 1)
    assert t1.time_to_tape == tape.Spread(6, 30.0, 60.0, 60.0)   # 10, 20, .., 60 s
    # 6 MB from the first copy (NOW-300) to the last on tape (NOW-300+5+60)
    assert abs(t1.rate - 6_000_000 / 65) < 1e-6
    assert abs(t1.recent_rate - 6_000_000 / tape.RECENT) < 1e-6
    # per source file: f0, f1 online after 10 s (copied to two tiers, staged once); f9 waits
    assert rep.staging == tape.Staging(staging=1, staged=2, failed=0,
                                       time_to_stage=tape.Spread(2, 10.0, 10.0, 10.0))


def test_status_report_json_and_png_show_tape(gridxfer_home, tmp_path):
    _journal().close()
    st = campaign_status("tr")
    assert st.tape is not None and st.to_dict()["tape"]["tiers"][0]["backlog"] == 2
    out = CliRunner().invoke(cli, ["campaign", "status", "tr"])
    assert out.exit_code == 0, out.output
    assert "tape T1: 6 on tape" in out.output and "backlog 2 files" in out.output
    assert "staging: 2 online, 1 waiting, 0 failed" in out.output
    out = CliRunner().invoke(cli, ["campaign", "report", "tr", "--png", str(tmp_path / "t.png")])
    assert out.exit_code == 0, out.output
    assert "tape T1:" in out.output and "time to tape p50 30.0s" in out.output
    assert summary.build_report("tr").to_dict()["tape"]["tiers"][0]["on_tape"] == 6
    tl = summary.timeline("tr")
    assert tl["tape"]["T1"]["disk"][-1] == 8_000_000     # f0-f7 copied
    assert tl["tape"]["T1"]["tape"][-1] == 6_000_000     # f0-f5 on tape
    assert (tmp_path / "t.png").stat().st_size > 0


def test_a_campaign_without_tape_reports_none(gridxfer_home):
    conn = journal.connect(journal.journal_path("d"), create=True)
    spec = CampaignSpec("d", SourceSpec("root://s.invalid//s/"),
                        (TierSpec("T2", ("root://d.invalid//d/",)),))
    planning.plan(conn, {"name": "d", "spec": json.dumps(spec_to_dict(spec))},
                 [("a", "root://s.invalid//s/a", 1, "T2", None)])
    assert tape.tape_report(conn, NOW) is None
