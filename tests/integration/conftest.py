"""Fixtures shared by the integration tests."""
from __future__ import annotations

import pytest
import yaml


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

