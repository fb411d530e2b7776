"""Fixtures shared by the integration tests."""
from __future__ import annotations

import pytest
import yaml


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test that used a real sshd (tuning.testing.sshd_host) shows the end of the
    server's log: why it ended a session is only there (a CI run once saw a session die
    right after authentication, with nothing on the client's side to say why)."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    from gridxfer.tuning.testing import SshdHost
    for value in getattr(item, "funcargs", {}).values():
        for v in value if isinstance(value, tuple) else (value,):
            if isinstance(v, SshdHost):
                report.sections.append((f"sshd log ({call.when})", v.log_tail()))


@pytest.fixture(autouse=True)
def _fresh_posc_verdicts(monkeypatch):
    """``movers.xrootd.upload`` remembers, per server (scheme://host:port), whether it keeps
    an open file POSC-pending. Tests start servers on free loopback ports, which come back:
    a server that ignores POSC (``ofs.persist off``) once got the port of an earlier one
    that honoured it, inherited its verdict, and was never probed (a flaky failure of
    test_xrootd_posc.py, session 34). Each test starts without verdicts."""
    from gridxfer.movers.xrootd import upload
    monkeypatch.setattr(upload, "_posc", {})


@pytest.fixture(scope="module")
def grid(tmp_path_factory, request):
    """The test module's ``TOPO`` (netgrid topology YAML) up without services, with a
    private $GRIDXFER_HOME, for the whole module; yields that home. ``down`` afterwards
    must leave none of the topology's namespaces (of this run: $GRIDXFER_NS_TAG) behind."""
    from gridxfer.testbed import netgrid, netns
    text = request.module.TOPO
    name = yaml.safe_load(text)["name"]
    home = tmp_path_factory.mktemp("gxhome")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GRIDXFER_HOME", str(home))
        topo = home / f"{name}.yaml"
        topo.write_text(text)
        netgrid.up(topo, services=False)
        try:
            yield home
        finally:
            netgrid.down()
    assert not [ns for ns in netns.listing() if ns.startswith(netgrid.ns_prefix(name))]


@pytest.fixture(scope="module")
def auth_grid(tmp_path_factory, grid_ca):
    """The testbed's servers with real authentication (localgrid.AUTH_SERVERS: t2-tok1,
    XRootD 5.5.3 with ztn and the SciTokens plugin, and its XrdHttp t2-davs1), up for the
    test module under a private $GRIDXFER_HOME (``extra["home"]``)."""
    import dataclasses
    import os

    from gridxfer.testbed import localgrid
    home = tmp_path_factory.mktemp("auth-grid-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GRIDXFER_HOME", str(home))
        inv = localgrid.up(localgrid.LocalGridSpec(servers=localgrid.AUTH_SERVERS, gsi=grid_ca,
                                                   owner_pid=os.getpid()))
        try:
            yield dataclasses.replace(inv, extra={**inv.extra, "home": str(home)})
        finally:
            localgrid.down()
