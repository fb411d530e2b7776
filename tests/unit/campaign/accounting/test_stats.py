"""Accounting: counts, windowed rates, endpoint snapshots, optimizer samples."""
from __future__ import annotations

import os

from gridxfer.campaign.accounting.stats import Accounting

POOLS = {"T1": ("root://a//", "root://b//"), "T2": ("root://c//",)}


def make():
    acct = Accounting(POOLS, started=100.0, clock=lambda: 101.0)
    acct.load("T1", files_total=10, bytes_total=1000, done=2, failed=0, bytes_done=200, queued=8)
    acct.load("T2", files_total=5, bytes_total=500, done=0, failed=1, bytes_done=0, queued=4)
    acct.set_cap("T1", 3, "fixed")
    return acct


def test_flight_lifecycle_and_endpoint_stats():
    acct = make()
    f1 = acct.start("T1", "root://a//", 100, 100.0)
    f2 = acct.start("T1", "root://a//", 100, 100.0)
    acct.progress(f1, 40)
    st = acct.pool_stats(POOLS["T1"], 100.5)
    # client progress is only trusted beyond the copy pipeline (meter.PROGRESS_LAG)
    assert st["root://a//"].pending == 2 and st["root://a//"].pending_bytes == 200
    assert st["root://b//"].pending == 0
    acct.finish(f1, ok=True, nbytes=100, error_class=None, outcome="done", now=101.0)
    acct.finish(f2, ok=False, nbytes=0, error_class="connection", outcome="retry", now=101.0)
    st = acct.pool_stats(POOLS["T1"], 101.0)["root://a//"]
    assert st.pending == 0 and st.completed == 1 and st.failures_in_row == 1
    assert st.ewma_rate > 0
    snap = acct.snapshot(101.0)
    t1 = snap.links[0]
    assert (t1.done, t1.failed, t1.active, t1.queued, t1.cap) == (3, 0, 0, 7, 3)
    assert snap.files_done == 3 and snap.files_failed == 1 and snap.retries == 1
    assert snap.failures == {"connection": 1}
    assert snap.bytes_done == 300 and snap.files_total == 15


def test_not_endpoint_fault_does_not_count_against_endpoint():
    acct = make()
    f = acct.start("T2", "root://c//", 10, 100.0)
    acct.finish(f, ok=False, nbytes=0, error_class="source_missing", outcome="failed", now=100.1)
    assert acct.pool_stats(POOLS["T2"], 100.2)["root://c//"].failures_in_row == 0
    assert acct.snapshot(100.2).links[1].failed == 2


def test_windowed_rate_and_eta():
    acct = make()
    f = acct.start("T1", "root://b//", 800, 100.0)
    for i in range(11):
        acct.progress(f, 50 * i)
        acct.tick(100.0 + i)          # 50 B/s
    snap = acct.snapshot(110.0)
    assert abs(snap.rate - 50.0) < 1e-6
    assert abs(snap.links[0].rate - 50.0) < 1e-6 and snap.links[1].rate == 0.0
    assert snap.eta is not None and abs(snap.eta - (1500 - 200) / 50.0) < 1e-6


def test_link_sample_counts_since_previous():
    acct = make()
    for ok in (True, True, False):
        f = acct.start("T1", "root://a//", 1, 100.0)
        acct.finish(f, ok=ok, nbytes=1, error_class=None if ok else "timeout",
                    outcome="done" if ok else "failed", now=100.1)
    s = acct.link_sample("T1", 100.2)
    assert (s.succeeded, s.failed, s.active) == (2, 1, 0)
    s = acct.link_sample("T1", 100.3)
    assert (s.succeeded, s.failed) == (0, 0)


def test_progress_render_reads_the_snapshot():
    from rich.console import Console

    from gridxfer.cli.progress import render

    acct = make()
    f = acct.start("T2", "root://c//", 10, 100.0)
    acct.finish(f, ok=False, nbytes=0, error_class="connection", outcome="retry", now=100.5)
    with open(os.devnull, "w") as sink:
        con = Console(width=140, record=True, file=sink)
        con.print(render(acct.snapshot(101.0), "demo"))
    text = con.export_text()
    assert "demo files 2/15" in text and "failed 1" in text
    assert "T1" in text and "3/10" not in text and "0/3" in text     # active/cap of T1
    assert "connection 1" in text and "retries 1" in text


def test_a_whole_file_in_one_report_is_credited_once_at_finish():
    """A small file's only progress report (all its bytes) takes no lock: finish() credits
    the bytes, exactly once; partial reports of a large file still count as they come."""
    acct = make()
    small = acct.start("T1", "root://a//", 4096, 100.0)
    big = acct.start("T1", "root://b//", 1000, 100.0)
    acct.progress(small, 4096)
    acct.progress(big, 400)
    assert (small.done, big.done) == (0, 400)
    assert acct.link_sample("T1", 100.5).moved == 400
    acct.finish(small, ok=True, nbytes=4096, error_class=None, outcome="done", now=101.0)
    acct.progress(big, 1000)
    acct.finish(big, ok=True, nbytes=1000, error_class=None, outcome="done", now=101.0)
    assert acct.link_sample("T1", 101.0).moved == 4096 + 1000
    st = acct.pool_stats(POOLS["T1"], 101.0)
    assert st["root://a//"].completed == 1 and st["root://a//"].pending_bytes == 0
