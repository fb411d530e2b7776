"""Tables that fit the terminal (issue 22b): at 80 columns whole columns go, no figure is
cut (today's `12/…`, `25.17 …`) and nothing wraps mid-number; at 120 everything shows.
Not on a terminal, the live view prints one progress line every GRIDXFER_PROGRESS_EVERY."""
from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from gridxfer.campaign.accounting.stats import LinkSnapshot, StatsSnapshot
from gridxfer.campaign.report.share import ShareReport
from gridxfer.campaign.report.summary import Bin, GroupStats
from gridxfer.cli import progress
from gridxfer.cli.report_text import render_report

MB = 1_000_000


def _console(width: int) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(width=width, file=buf, color_system=None, force_terminal=False,
                   legacy_windows=False), buf


def _snap(now: float = 100.0, done: int = 12345) -> StatsSnapshot:
    links = tuple(LinkSnapshot(tier=f"T1-{site}-DISK", active=17, cap=24,
                               reason="slow start: 25.17 MB/s at 12, trying 24", queued=31234,
                               files_total=40000, done=done, failed=1234,
                               bytes_total=4000 * 10**9, bytes_done=1234567 * MB,
                               rate=25.17 * MB, ahead=3)
                  for site in ("CNAF", "PIC", "GRIDKA"))
    return StatsSnapshot(now=now, elapsed=3725.0, files_total=120000, files_done=3 * done,
                         files_failed=3702, files_active=51, bytes_total=12000 * 10**9,
                         bytes_done=3 * 1234567 * MB, rate=75.51 * MB, mean_rate=70 * MB,
                         eta=151234.0, retries=42, failures={"timeout": 40, "checksum": 2},
                         links=links, endpoints=())


def _figures_whole(text: str, figures: list[str]) -> None:
    flat = " ".join(text.split())
    for f in figures:
        assert re.search(rf"(^|\s){re.escape(f)}(\s|$)", flat), (f, text)


@pytest.mark.parametrize("width", [80, 120])
def test_live_view_fits_and_cuts_no_figure(width):
    con, buf = _console(width)
    con.print(progress.render(_snap(), "sc-t0-t1", {}, width))
    text = buf.getvalue()
    assert max(len(line) for line in text.splitlines()) <= width, text
    assert "\u2026" not in text and "..." not in text, text
    _figures_whole(text, ["12345/40000", "25.2 MB/s", "14/24 +3", "T1-GRIDKA-DISK",
                          "files 37035/120000", "rate 75.5 MB/s"])
    if width >= 120:
        assert "optimizer" in text and "queued" in text and "31234" in text


@pytest.mark.parametrize("width", [80, 120])
def test_report_tables_fit_and_cut_no_figure(width):
    g = [GroupStats(f"T1-{s}-DISK", f"T1-{s}-DISK", 12345, 1234, 12345, 1234567 * MB,
                    25.17 * MB, 1.23 * MB, 123.45 * MB, 12.34 * MB,
                    {"timeout": 40, "checksum": 2, "connection": 17})
         for s in ("CNAF", "PIC")]
    rep = type("Rep", (), dict(
        name="sc-t0-t1", state="done", files_done=24690, files_total=27158, files_failed=2468,
        bytes_done=2469134 * MB, seconds=3725.0, rate=662.8 * MB, job_metadata=None,
        links=g, endpoints=g, names={}, tape=None, failed_files=(),
        histogram=[Bin(i * 20 * MB, (i + 1) * 20 * MB, 100 * i, i / 10) for i in range(5)],
        share=ShareReport(0.0, 0.0, (), ())))()
    con, buf = _console(width)
    render_report(rep, con)
    text = buf.getvalue()
    assert max(len(line) for line in text.splitlines()) <= width, text
    assert "\u2026" not in text, text
    _figures_whole(text, ["12345", "1234", "25.2 MB/s", "T1-CNAF-DISK", "80 - 100"])
    if width >= 120:
        _figures_whole(text, ["1.2 MB/s", "123.5 MB/s", "12.3 MB/s", "1.23 TB"])


def test_not_a_terminal_prints_a_line_every_interval():
    con, buf = _console(200)
    live = progress.LiveProgress("c9", console=con, every=30.0)
    with live:
        for t in (0.0, 10.0, 29.0, 30.0, 45.0, 61.0, 75.0):
            live(_snap(now=1000.0 + t, done=int(t)))
    lines = buf.getvalue().splitlines()
    # at 0, 30 and 61, and the last snapshot (75) when the run ends
    assert [re.search(r"files (\d+)/", ln).group(1) for ln in lines] == ["0", "90", "183", "225"]
    assert all(ln.startswith("c9 files ") and "T1-CNAF-DISK 61/40000 25.2 MB/s" in lines[2]
               for ln in lines)


def test_progress_every_from_the_environment(monkeypatch):
    """A bad value is refused when the command starts (envsettings.check, tests/cli/
    test_environment_cli.py); the reader itself never raises."""
    monkeypatch.setenv("GRIDXFER_PROGRESS_EVERY", "2m")
    assert progress.progress_every() == 120.0
    monkeypatch.setenv("GRIDXFER_PROGRESS_EVERY", "soon")
    assert progress.progress_every() == 30.0


def test_summary_lines_break_between_figures_only():
    from gridxfer.cli.columns import summary
    text = ("campaign sc-t0-t1-reprocessing-2026: partial: 1234567/1300000 files done, "
            "65433 failed, 1234.57 TB of 1300.00 TB in 72h03m12s (4761.9 MB/s), "
            "12 recovered after a crash")
    assert summary(text, None) == [text]                  # a pipe: one line, for grep
    out = summary(text, 80)
    assert len(out) > 1 and all(len(line) <= 80 for line in out), out
    assert " ".join(" ".join(out).split()) == text        # nothing lost, nothing cut
    for figure in ("1234567/1300000", "1234.57 TB", "(4761.9 MB/s),", "72h03m12s"):
        assert any(figure in line for line in out), (figure, out)


def test_status_summary_fits_a_terminal(monkeypatch, capsys, gridxfer_home):
    from gridxfer.campaign.journal import planning, store
    from gridxfer.cli import columns
    from gridxfer.cli.main import main
    conn = store.connect(store.journal_path("a-rather-long-campaign-name-2026"), create=True)
    planning.plan(conn, {"name": "a-rather-long-campaign-name-2026", "state": "running"},
               [(f"f{i}", f"root://s//f{i}", 10**9, "T1", None) for i in range(3)])
    conn.close()
    monkeypatch.setattr(columns, "terminal_width", lambda: 60)
    assert main(["campaign", "status", "a-rather-long-campaign-name-2026"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert all(len(line) <= 60 for line in out), out
    assert any("3.00 GB" in line for line in out), out
