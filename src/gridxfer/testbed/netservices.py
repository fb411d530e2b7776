"""Real XRootD and GSI GridFTP servers inside the hosts of the netns grid.

Reuses the local grid's launchers (:func:`gridxfer.testbed.xrootd.start_xrootd`,
:func:`gridxfer.testbed.gridftp.start_gridftp`) with ``wrap=["ip","netns","exec",NS]``
and ``bind=<host address>``. Each namespace has its own port space, so every storage
host serves ``root://ADDR:1094//data/`` and ``gsiftp://ADDR:2811/<dir>/data/``. The GSI
host certificate of each host is issued by the grid's test CA with CN and SANs = its
address. Server files live in a world-traversable ``/tmp/gridxfer-netgrid-*`` because
the servers run as the unprivileged ``gridxfer`` user.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import ca as ca_mod
from . import inventory as inv_mod
from .inventory import Endpoint, Inventory
from .netns import wrap
from .topology import Topology

XROOTD_PORT = 1094
GRIDFTP_PORT = 2811
BASE_PREFIX = "gridxfer-netgrid-"


def _save(st: dict[str, Any]) -> None:
    from .netgrid import _save as save_state
    save_state(st)


def placeholder_inventory(st: dict[str, Any]) -> None:
    """An endpoint-less netns inventory, written first, so that `testbed down` picks the
    netns teardown even when `up` is killed before the servers start."""
    inv_mod.save_inventory(Inventory(mode="netns", endpoints={}, env={},
                                     base_dir=st.get("base_dir", ""), extra=_extra(st)))


def _extra(st: dict[str, Any]) -> dict[str, Any]:
    return {"name": st["name"], "topology": st["topology"], "router": st["router"],
            "controller": st.get("controller"), "hosts": st["hosts"], "links": st.get("links", [])}


def start_services(topo: Topology, st: dict[str, Any], notify: Callable[[str], None]) -> Inventory:
    """Start every host's services; write and return the netns Inventory."""
    from .gridftp import start_gridftp
    from .localgrid import client_env
    from .xrootd import ensure_user, start_xrootd

    wanted = [h for h in topo.hosts if h.services]
    endpoints: dict[str, Endpoint] = {}
    extra = _extra(st)
    env: dict[str, str] = {}
    if wanted:
        base = Path(tempfile.mkdtemp(prefix=BASE_PREFIX, dir=os.environ.get("GRIDXFER_TESTBED_DIR")
                                     or tempfile.gettempdir()))
        os.chmod(base, 0o755)
        st["base_dir"] = str(base)
        _save(st)
        user = ensure_user()
        gsi = None
        if any("gridftp" in h.services for h in wanted):
            gsi = ca_mod.make_test_ca(base / "ca", local_user=user)
            env = client_env(gsi)
            extra["gsi"] = dataclasses.asdict(gsi)
        extra["service_user"] = user
        for host in wanted:
            ns = st["hosts"][host.name]["netns"]
            prefix = wrap(ns)
            if "xrootd" in host.services:
                ep = start_xrootd(f"{host.name}-xrd", base / host.name / "xrd", port=XROOTD_PORT,
                                  bind=host.address, wrap=prefix, tier=host.tier)
                endpoints[ep.name] = dataclasses.replace(ep, host=ns)
            if "gridftp" in host.services and gsi is not None:
                cert, key = ca_mod.host_cert(gsi, host.address, dns=[host.name], ips=[host.address])
                ep = start_gridftp(f"{host.name}-gsiftp", base / host.name / "gsiftp", gsi=gsi,
                                   port=GRIDFTP_PORT, bind=host.address, host=host.address,
                                   wrap=prefix, tier=host.tier, cert=cert, key=key)
                endpoints[ep.name] = dataclasses.replace(ep, host=ns)
            if "sshd" in host.services:
                notify(f"{host.name}: sshd service is not built yet; skipped")
            st["pids"].update({n: e.pid for n, e in endpoints.items()})
            _save(st)
    inv = Inventory(mode="netns", endpoints=endpoints, env=env, base_dir=st.get("base_dir", ""),
                    pids={n: e.pid for n, e in endpoints.items()}, extra=extra)
    inv_mod.save_inventory(inv)
    return inv


def cleanup_services(st: dict[str, Any]) -> None:
    """Remove server files and the inventory (processes died with their namespaces)."""
    base = st.get("base_dir")
    if base and Path(base).name.startswith(BASE_PREFIX):
        shutil.rmtree(base, ignore_errors=True)
    try:
        if inv_mod.load_inventory().mode == "netns":
            inv_mod.remove_inventory()
    except inv_mod.TestbedError:
        pass
