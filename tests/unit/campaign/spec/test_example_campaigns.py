"""Every campaign file in examples/ loads as it is shipped (the fuzz suite only mutates
them, with their sources made local): a user's first copy must not start with an error."""
from __future__ import annotations

from pathlib import Path

import pytest

from gridxfer.campaign.spec.schema import load_spec
from gridxfer.errors import GridxferError

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"
CAMPAIGNS = sorted(p for p in EXAMPLES.glob("*.yaml") if "\ncampaign:" in "\n" + p.read_text()
                   or p.read_text().startswith("campaign:"))


def test_the_examples_are_found():
    assert {p.stem for p in CAMPAIGNS} >= {"sc-t0-t1", "davs-tokens", "tape-archive",
                                          "fts3-handoff"}


@pytest.mark.parametrize("path", CAMPAIGNS, ids=lambda p: p.stem)
def test_each_example_campaign_loads(path, gridxfer_home):
    """Those written for the testbed name its endpoints, and say so: without one up, that
    is their only error."""
    if "testbed up" in path.read_text():
        with pytest.raises(GridxferError, match="no testbed is up"):
            load_spec(path)
        return
    spec = load_spec(path)
    assert spec.destinations and all(t.pool for t in spec.destinations)
