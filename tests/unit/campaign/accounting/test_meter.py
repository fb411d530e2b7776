from gridxfer.campaign.accounting.meter import EndpointMeter

MB = 1_000_000


def test_aggregate_throughput_from_overlapping_sessions():
    m = EndpointMeter()
    # a server sharing 10 MB/s between two sessions: 10 MB each, both end at t=2
    m.start("a", 1, 10 * MB, 0.0)
    m.start("a", 2, 10 * MB, 0.0)
    assert m.snapshot(1.0)["a"].pending == 2
    assert m.snapshot(1.0)["a"].pending_bytes == 20 * MB
    m.end("a", 1, True, 2.0)
    m.end("a", 2, True, 2.0)
    s = m.snapshot(2.0)["a"]
    assert s.throughput == 10 * MB and s.ewma_rate == 5 * MB
    assert s.completed == 2 and s.pending == 0 and s.pending_bytes == 0


def test_busy_time_not_per_transfer_rates():
    m = EndpointMeter(alpha=1.0, window=2.0)
    m.start("a", 1, 10 * MB, 0.0)       # 1 s of set-up, then 10 MB at 10 MB/s
    m.end("a", 1, True, 2.0)
    assert m.snapshot(2.0)["a"].throughput == 5 * MB      # 10 MB over 2 busy seconds
    m.start("a", 2, 10 * MB, 10.0)      # idle 2..10 s does not count
    m.progress("a", 2, 4 * MB, 11.0)
    assert m.snapshot(11.0)["a"].throughput == 5 * MB     # < 2 busy seconds: no new sample
    m.end("a", 2, True, 12.0)
    assert m.snapshot(12.0)["a"].throughput == 5 * MB     # 10 MB in 2 s


def test_progress_lowers_pending_bytes_and_failures_count_in_a_row():
    m = EndpointMeter(progress_lag=0)
    m.start("a", 1, 10 * MB, 0.0)
    m.progress("a", 1, 4 * MB, 0.5)
    m.progress("a", 1, 3 * MB, 0.6)     # never goes backwards
    assert m.snapshot(1.0)["a"].pending_bytes == 6 * MB
    m.end("a", 1, False, 1.0)
    m.start("a", 2, 1, 1.0)
    m.end("a", 2, False, 1.1)
    m.start("a", 3, 1, 1.1)
    m.end("a", 3, False, 1.2, counts_as_failure=False)   # e.g. source missing
    s = m.snapshot(2.0)["a"]
    assert s.failures_in_row == 2 and s.throughput == 0 and s.pending == 0
    m.set_free("a", 123, 2.0)
    assert m.snapshot(2.0)["a"].free_bytes == 123


def test_stall_clock_runs_only_while_busy_and_nothing_moves():
    m = EndpointMeter(alpha=1.0, progress_lag=0)
    m.start("a", 1, 10 * MB, 0.0)
    assert m.snapshot(3.0)["a"].stalled == 3.0
    m.progress("a", 1, 1 * MB, 4.0)
    m.progress("a", 1, 2 * MB, 5.0)
    s = m.snapshot(7.5)["a"]
    assert s.stalled == 2.5 and s.move_gap == 1.0
    m.end("a", 1, True, 8.0)
    assert m.snapshot(20.0)["a"].stalled == 0.0          # idle is not stalled
    m.start("a", 2, 1, 30.0)
    assert m.snapshot(31.0)["a"].stalled == 1.0          # counted from the new busy period


def test_client_progress_is_trusted_only_beyond_the_pipeline_lag():
    """XrdCl reports a small file copied at once, then waits on a slow server."""
    m = EndpointMeter(alpha=1.0, window=2.0)             # default lag: 32 MiB
    m.start("slow", 1, 5 * MB, 0.0)
    m.progress("slow", 1, 5 * MB, 0.1)
    s = m.snapshot(3.0)["slow"]
    assert s.pending_bytes == 5 * MB and s.throughput == 0 and s.stalled == 3.0
    m.start("big", 2, 100 * MB, 0.0)
    m.progress("big", 2, 50 * MB, 2.0)
    assert m.snapshot(2.0)["big"].pending_bytes == 100 * MB - (50 * MB - 32 * 2**20)
    m.end("slow", 1, True, 4.0)
    assert m.snapshot(4.0)["slow"].throughput == 5 * MB / 4   # 5 MB in 4 busy seconds
