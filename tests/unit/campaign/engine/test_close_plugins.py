"""factories.close_plugins: what the scheduler and the steering close at the end of a run."""
from __future__ import annotations

from gridxfer.campaign.engine.factories import close_plugins


class Plugin:
    def __init__(self, fail: bool = False) -> None:
        self.fail, self.closed = fail, False

    def close(self) -> None:
        self.closed = True
        if self.fail:
            raise RuntimeError("its thread would not stop")


def test_each_plugin_with_close_is_closed_and_one_failure_stops_none():
    first, broken, last = Plugin(), Plugin(fail=True), Plugin()
    close_plugins([first, object(), broken, "no close", last])
    assert first.closed and broken.closed and last.closed
