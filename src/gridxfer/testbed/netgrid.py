"""Grid in a box: each host a network namespace, tiers joined by emulated WAN links.

Layout (``name`` = topology name)::

    gx-<name>-<host>  eth0 198.18.x.y/32 ──veth── vhN  gx-<name>-router
                                                       │ ip rule iif vhN lookup <tier table>
                                                       │ tier table: <other tier> dev tlKa|tlKb
                                                       └ TUN tlKa (A->B), tlKb (B->A): htb rate,
                                                         delay line process (rtt/2, loss)
    root namespace    gxc-<name> ──veth── vctl (joins the controller tier; optional)

With ``$GRIDXFER_NS_TAG`` set (1-8 chars of [a-z0-9]; the test suite sets it per run),
namespaces are ``gx-<name>.<tag>-<host>`` and the root link ``gxt<12 hex digits>``, so
two grids of the same topology (two test runs at once) never meet.

Packets written back by the delay line arrive *from* the TUN, so the main table (one /32
per host) delivers them. Where tc has netem, or a link has no RTT and no loss, a veth loop
replaces the TUN (:mod:`gridxfer.testbed.wanlink`). State (namespaces, devices, pids) is
written to ``$GRIDXFER_HOME/testbed/netgrid.json`` *before* anything is created, so ``down``
removes everything even after ``kill -9`` of ``up``.

API (used by ``gridxfer testbed`` and netbench): :func:`up`, :func:`down`, :func:`status`,
:func:`status_lines`, :func:`exec_in`, :func:`hosts`.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gridxfer import envsettings, state
from gridxfer.errors import UsageError
from gridxfer.testbed import inventory as inv_mod
from gridxfer.testbed import netbuild, netns, netservices
from gridxfer.testbed.inventory import TestbedError, testbed_dir
from gridxfer.testbed.topology import load

STATE_NAME = "netgrid.json"
LOCAL = "local"                 # this machine (root namespace) as a grid host
TAG_ENV = "GRIDXFER_NS_TAG"     # per-run suffix of every name the grid creates
_TAG_RE, _TAG_FORM = envsettings.FORMS[TAG_ENV]
Notify = Callable[[str], None]


@dataclass(frozen=True)
class NetHost:
    """A host of the running grid, as netbench and exec need it."""
    name: str
    netns: str
    address: str
    tier: str


def state_path() -> Path:
    return testbed_dir() / STATE_NAME


def _load_state() -> dict[str, Any] | None:
    path = state_path()
    if not path.exists():
        return None
    try:
        return state.read_json(path)
    except ValueError as exc:
        raise TestbedError(f"unreadable netgrid state {path}: {exc}") from exc


def _save(st: dict[str, Any]) -> None:
    state.write_json(state_path(), st)


def ns_tag() -> str:
    """``$GRIDXFER_NS_TAG`` ("" when unset); a bad value is a usage error."""
    tag = os.environ.get(TAG_ENV, "")
    if tag and not _TAG_RE.fullmatch(tag):
        raise UsageError(f"{TAG_ENV}={tag!r}: must be {_TAG_FORM}")
    return tag


def ns_prefix(topo: str) -> str:
    """What every namespace of topology ``topo`` starts with (under the current tag).
    '.' is in no topology or host name, so two prefixes never overlap."""
    tag = ns_tag()
    return f"gx-{topo}.{tag}-" if tag else f"gx-{topo}-"


def ns_name(topo: str, host: str) -> str:
    return ns_prefix(topo) + host


def root_link_name(topo: str) -> str:
    """The controller's veth in the root namespace (IFNAMSIZ: at most 15 chars)."""
    tag = ns_tag()
    if not tag:
        return f"gxc-{topo}"                        # topology names have <= 10 chars
    return "gxt" + hashlib.sha256(f"{topo}.{tag}".encode()).hexdigest()[:12]


def _stderr(msg: str) -> None:
    print(f"gridxfer: {msg}", file=sys.stderr)


def up(topology_path: str | os.PathLike, *, notify: Notify = _stderr, services: bool = True):
    """Build the grid described by ``topology_path``; returns the Inventory.

    Without CAP_NET_ADMIN it falls back to the loopback local grid (with a message).
    """
    topo = load(os.fspath(topology_path))
    if not netns.has_cap_net_admin():
        notify("no CAP_NET_ADMIN: network namespaces unavailable; falling back to the "
               "loopback local grid (no RTT, rate or loss emulation)")
        from gridxfer.testbed import localgrid
        return localgrid.up()
    if inv_mod.inventory_path().exists():
        try:
            other = inv_mod.load_inventory().mode
        except TestbedError:
            other = "netns"
        if other != "netns":
            raise TestbedError(f"a {other} testbed is up; run `gridxfer testbed down` first")
    old = _load_state()
    if old is not None:
        if old.get("phase") == "up" and all(netns.exists(n) for n in old["namespaces"]):
            raise TestbedError(f"a netns testbed ({old['name']!r}) is already up; "
                               "run `gridxfer testbed down` first")
        notify("removing the remains of an interrupted testbed")
        down()
    clash = [ns_name(topo.name, h) for h in ("router", *(h.name for h in topo.hosts))
             if netns.exists(ns_name(topo.name, h))]
    if clash:
        raise TestbedError(f"namespaces already exist (another testbed?): {', '.join(clash)}")
    router = ns_name(topo.name, "router")
    st: dict[str, Any] = {
        "mode": "netns", "name": topo.name, "topology": str(Path(topology_path).resolve()),
        "phase": "building", "router": router,
        # hosts first, router last: the order down() deletes them
        "namespaces": [ns_name(topo.name, h.name) for h in topo.hosts] + [router],
        "scratch_namespaces": [ns_name(topo.name, "probe")],     # the netem test, short-lived
        "root_links": [root_link_name(topo.name)] if topo.controller else [],
        "hosts": {h.name: {"netns": ns_name(topo.name, h.name), "address": h.address,
                           "tier": h.tier, "services": list(h.services), "role": h.role}
                  for h in topo.hosts},
        "controller": topo.controller_address(), "controller_tier": topo.controller,
        "pids": {}, "links": [],
    }
    _save(st)
    try:
        netservices.placeholder_inventory(st)
        st["netem"] = netns.netem_available(st["scratch_namespaces"][0])
        netbuild.build_network(topo, st, _save)
        if services:
            inv = netservices.start_services(topo, st, notify)
        else:
            netservices.placeholder_inventory(st)
            inv = inv_mod.load_inventory()
        st["phase"] = "up"
        _save(st)
    except BaseException:
        down()
        raise
    return inv


def down() -> None:
    """Tear everything down: processes, namespaces (with their veths/TUNs), root links.

    Idempotent; works from the on-disk state after a crash or ``kill -9`` of ``up``.
    """
    st = _load_state()
    if st is None:
        return
    netns.kill_pids([int(p) for p in st.get("pids", {}).values() if _is_ours(int(p))])
    for ns in st.get("scratch_namespaces", []) + st.get("namespaces", []):
        netns.delete(ns)
    for ns in st.get("namespaces", []):
        netns.remove_etc(ns)
    for dev in st.get("root_links", []):
        if netns.link_exists(None, dev):
            netns.ip(None, "link", "delete", dev, check=False)
    netservices.cleanup_services(st)
    left = [ns for ns in st.get("namespaces", []) if netns.exists(ns)]
    if left:
        raise TestbedError(f"could not delete namespaces: {', '.join(left)}")
    for log in testbed_dir().glob("delayline-*.log"):
        log.unlink(missing_ok=True)
    state_path().unlink(missing_ok=True)


def _is_ours(pid: int) -> bool:
    """Guard against pid reuse: only signal processes of the testbed (ip/python/servers)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(b"gridxfer" in c or b"xrootd" in c or b"gridftp" in c or b"sshd" in c
               or c.endswith(b"ip") for c in cmd)


def status() -> dict[str, Any]:
    """What is up: mode, hosts, links, and which namespaces/processes are alive."""
    st = _load_state()
    if st is None:
        return {"mode": "netns", "up": False}
    alive = {name: _alive(int(pid)) for name, pid in st.get("pids", {}).items()}
    present = {ns: netns.exists(ns) for ns in st.get("namespaces", [])}
    endpoints: dict[str, Any] = {}
    ssh: dict[str, Any] = {}
    try:
        inv = inv_mod.load_inventory()
        ssh = inv.extra.get("ssh", {}) if inv.mode == "netns" else {}
        endpoints = {n: {"url": ep.url, "protocol": ep.protocol, "tier": ep.tier, "pid": ep.pid,
                         "alive": _alive(ep.pid), "host": ep.host, "log": ep.log}
                     for n, ep in inv.endpoints.items()} if inv.mode == "netns" else {}
    except TestbedError:
        pass
    return {"mode": "netns", "up": st.get("phase") == "up" and all(present.values())
            and all(alive.values()), "phase": st.get("phase"), "name": st.get("name"),
            "topology": st.get("topology"), "hosts": st.get("hosts", {}),
            "links": st.get("links", []), "controller": st.get("controller"),
            "namespaces": present, "processes": alive, "netem": st.get("netem", False),
            "endpoints": endpoints, "base_dir": st.get("base_dir"), "ssh": ssh}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][:1] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def hosts(*, with_local: bool = False) -> dict[str, NetHost]:
    """The hosts of the running grid (raises TestbedError if none is up). With
    ``with_local``, also ``local``: this machine's root namespace (netns ``""``), when the
    topology attaches it to a tier (``controller``)."""
    st = _load_state()
    if st is None:
        raise TestbedError("no netns testbed is up; run `gridxfer testbed up TOPOLOGY` first")
    out = {name: NetHost(name, h["netns"], h["address"], h["tier"])
           for name, h in st["hosts"].items()}
    if with_local and st.get("controller") and st.get("controller_tier"):
        out[LOCAL] = NetHost(LOCAL, "", st["controller"], st["controller_tier"])
    return out


def exec_in(host: str, argv: list[str]) -> int:
    """Run ``argv`` inside ``host``'s namespace (``router`` = the router); its exit code."""
    st = _load_state()
    if st is None:
        raise TestbedError("no netns testbed is up; run `gridxfer testbed up TOPOLOGY` first")
    if host == "router":
        ns = st["router"]
    elif host in st["hosts"]:
        ns = st["hosts"][host]["netns"]
    else:
        raise TestbedError(f"no host {host!r} (hosts: {', '.join(sorted(st['hosts']))}, router)")
    if not argv:
        raise TestbedError("nothing to run: give a command after --")
    env = dict(os.environ)
    with contextlib.suppress(TestbedError):
        env.update(inv_mod.load_inventory().client_env())
    try:
        return subprocess.call([*netns.wrap(ns), *argv], env=env)
    except FileNotFoundError:
        raise TestbedError("ip not found (install iproute2)") from None



def status_lines(st: dict[str, Any]) -> list[str]:
    """Human-readable lines of :func:`status` (hosts, links, servers) for the CLI."""
    if not st.get("up") and not st.get("hosts"):
        return ["no netns testbed is up"]
    out = [f"netns testbed {st.get('name')!r}: {'up' if st.get('up') else 'DEGRADED'} "
           f"({st.get('topology')})"]
    for name, h in sorted(st.get("hosts", {}).items()):
        out.append(f"  host {name:<14} tier {h['tier']:<8} {h['address']:<15} netns {h['netns']}")
    for lk in st.get("links", []):
        rate = f"{lk['rate_bps'] / 1e6:.0f} Mbit/s" if lk.get("rate_bps") else "unlimited"
        out.append(f"  link {lk['from']} -> {lk['to']}: {lk['rtt_s'] * 1e3:g} ms RTT, {rate}, "
                   f"loss {lk['loss'] * 100:g} % ({lk.get('method', 'delayline')} {lk['dev']})")
    for name, alive in sorted(st.get("processes", {}).items()):
        if not alive:
            out.append(f"  DEAD {name}")
    for name, ep in sorted(st.get("endpoints", {}).items()):
        flag = "running" if ep.get("alive") else "DEAD"
        out.append(f"  {name:<18} {flag:<8} pid {ep.get('pid')}  {ep.get('url')}")
    for name, sh in sorted(st.get("ssh", {}).items()):
        out.append(f"  {name + '-sshd':<18} ssh -i {sh['key']} -o UserKnownHostsFile="
                   f"{sh['known_hosts']} {sh['user']}@{sh['host']}")
    if st.get("controller"):
        out.append(f"  this host joins the grid as {st['controller']}")
    return out
