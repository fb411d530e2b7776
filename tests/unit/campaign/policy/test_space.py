import os
import time

from gridxfer.campaign.policy.space import SpaceWatcher, query_free


def test_query_free_local_and_unknown(tmp_path):
    st = os.statvfs(tmp_path)
    got = query_free((tmp_path / "not" / "there" / "yet").as_uri() + "/")
    assert abs(got - st.f_bavail * st.f_frsize) < 64 * 2**20      # same filesystem
    assert query_free("no-scheme") is None


def test_watcher_polls_in_the_background_and_stops_when_idle():
    calls = []
    w = SpaceWatcher(lambda url: calls.append(url) or 42, period=0.01, idle_stop=0.2)
    w.watch(["root://x//d/", "plain-name"])
    deadline = time.time() + 5
    while w.free("root://x//d/") is None and time.time() < deadline:
        time.sleep(0.01)
    assert w.free("root://x//d/") == 42 and w.free("plain-name") is None
    assert set(calls) == {"root://x//d/"}
    # nobody asks any more: after idle_stop (0.2 s) the thread ends, and polls no more
    deadline = time.monotonic() + 10
    while w._threads and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not w._threads
    n = len(calls)
    time.sleep(0.1)
    assert len(calls) == n


def test_gridftp_is_first_asked_after_the_start_up_delay():
    """A GridFTP space query costs a GSI session of its own: not during the start-up burst,
    not even on refresh(); root:// is asked at once."""
    calls: list[tuple[str, float]] = []
    t0 = time.monotonic()
    w = SpaceWatcher(lambda url: calls.append((url, time.monotonic() - t0)) or 7, period=0.05,
                     first_delay=lambda url: 0.6 if url.startswith("gsiftp") else 0.0)
    try:
        w.watch(["root://x//d/", "gsiftp://g/d/"])
        time.sleep(0.2)
        w.refresh("gsiftp://g/d/")                  # must not cut the delay short
        deadline = time.monotonic() + 10
        while None in (w.free("root://x//d/"), w.free("gsiftp://g/d/")) \
                and time.monotonic() < deadline:
            time.sleep(0.02)
        assert w.free("root://x//d/") == 7 and w.free("gsiftp://g/d/") == 7
        first = min(t for u, t in calls if u.startswith("gsiftp"))
        assert first >= 0.6
    finally:
        w.close()


def test_first_probe_delay_by_scheme():
    from gridxfer.campaign.policy.space import SESSION_PROBE_DELAY, first_probe_delay
    assert first_probe_delay("gsiftp://h:2811/d/") == SESSION_PROBE_DELAY > 0
    assert first_probe_delay("FTP://h/d/") == SESSION_PROBE_DELAY
    assert first_probe_delay("root://h//d/") == first_probe_delay("file:///d/") == 0.0
