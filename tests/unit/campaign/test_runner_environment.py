"""prepare_environment: OpenSSL's CA file is looked at (movers/gfal/systemca: both the
file and the hashed directory read, ~6 ms) only for a campaign that names a davs/https
URL, where davix would parse it on every request."""
from __future__ import annotations

import pytest

from gridxfer.campaign import runner
from gridxfer.campaign.spec.schema import load_spec

SPEC = """\
campaign: env
source: {{url: "{src}", files: {{glob: "*.dat"}}}}
destinations:
  - tier: T1
    pool: ["root://t1.example:1094//data/", "{dst}"]
checksum: none
"""


@pytest.mark.parametrize(("src", "dst", "applied"), [
    ("root://t0.example:1094//data/", "gsiftp://t1.example/data/", False),
    ("davs://t0.example:1094/data/", "gsiftp://t1.example/data/", True),
    ("root://t0.example:1094//data/", "https://t1b.example/data/", True),
])
def test_the_ca_file_is_looked_at_only_for_an_http_campaign(tmp_path, monkeypatch, src, dst,
                                                             applied):
    calls: list[int] = []
    monkeypatch.setattr(runner.systemca, "apply", lambda: calls.append(1))
    path = tmp_path / "c.yaml"
    path.write_text(SPEC.format(src=src, dst=dst))
    runner.prepare_environment(load_spec(path))
    assert calls == ([1] if applied else [])
