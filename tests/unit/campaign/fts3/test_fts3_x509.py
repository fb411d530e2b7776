"""X.509 as FTS3 users authenticate: the test CA's RFC proxy over HTTPS, delegated to the
STAND-IN (not FTS3) by the official client's own delegation (easy.submit), as it was to the
real fts-rest-flask (docs/fts3.md)."""
from __future__ import annotations

from pathlib import Path

import pytest

from gridxfer.campaign import runner
from gridxfer.campaign.fts3 import engine as fts3_engine
from gridxfer.testbed.fts3delegation import delegation_id
from gridxfer.testbed.fts3standin import StandIn


@pytest.fixture
def tls_standin(grid_ca):
    s = StandIn("no-token-here", tls=(grid_ca.host_cert, grid_ca.host_key, grid_ca.ca_cert))
    s.start()
    yield s
    s.stop()


def test_a_campaign_with_an_x509_proxy_delegates_then_submits(tmp_path: Path, gridxfer_home,
                                                               grid_ca, tls_standin,
                                                               monkeypatch):
    monkeypatch.setattr(fts3_engine, "POLL_EVERY", 0.05)
    f = tmp_path / "c.yaml"
    f.write_text(f"""
campaign: x509
engine: fts3
fts3: {{endpoint: "{tls_standin.url}", proxy: "{grid_ca.proxy}"}}
source: {{url: "root://s.example//d/", files: [{{name: a, size: 10}}, {{name: b, size: 20}}]}}
destinations:
  - {{tier: t, pool: ["root://d.example//x/"]}}
""")
    res = runner.run_campaign(f)
    assert res.state == "done" and res.files_done == 2
    assert tls_standin.delegations.delegated == 1
    (job,) = tls_standin.jobs.values()
    assert job["user_dn"] == grid_ca.user_dn
    assert job["vo_name"] == delegation_id(grid_ca.user_dn)     # the "virtual VO"
    assert job["job_metadata"]["auth_method"] == "certificate"


def test_without_a_delegation_a_certificate_user_cannot_submit(grid_ca, tls_standin):
    from fts3.rest.client import easy
    from fts3.rest.client.submitter import Submitter
    ctx = easy.Context(tls_standin.url, ucert=grid_ca.proxy, ukey=grid_ca.proxy)
    job = easy.new_job([easy.new_transfer("root://s.example//d/a", "root://d.example//x/a")])
    with pytest.raises(easy.exceptions.NeedDelegation):
        Submitter(ctx).submit(transfers=job["files"], **job["params"])
    assert tls_standin.jobs == {}
