import os
import time

from gridxfer.campaign.space import SpaceWatcher, query_free


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
    time.sleep(0.5)                     # nobody asked for 0.2 s: the thread is gone
    n = len(calls)
    time.sleep(0.1)
    assert len(calls) == n
