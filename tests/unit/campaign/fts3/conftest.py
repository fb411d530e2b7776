"""The FTS3 stand-in for a token user (gridxfer.testbed.fts3standin: NOT FTS3), shared by
the refusal and job-id tests; modules that need X.509 or their own issuer override
``standin``."""
from __future__ import annotations

import pytest

from gridxfer.testbed import tokens as testbed_tokens
from gridxfer.testbed.fts3standin import StandIn


@pytest.fixture(scope="module")
def jwt(tmp_path_factory) -> str:
    issuer = testbed_tokens.make_issuer(tmp_path_factory.mktemp("issuer"))
    return testbed_tokens.mint(issuer, ["storage.read:/"])


@pytest.fixture
def standin(jwt):
    s = StandIn(jwt)
    s.start()
    yield s
    s.stop()
