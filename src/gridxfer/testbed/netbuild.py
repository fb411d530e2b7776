"""Building the namespaces, veths, addresses, policy routing and WAN links of the grid
(see :mod:`gridxfer.testbed.netgrid` for the layout). Every step is recorded in the state
before it is taken, so a teardown after ``kill -9`` finds everything.
"""
from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from gridxfer.testbed import netns, wanlink
from gridxfer.testbed.inventory import testbed_dir
from gridxfer.testbed.topology import ROUTER_ADDR, Topology

MTU = wanlink.MTU
TABLE_BASE = 1000
# The initial receive buffer of every host holds at least this many full-size segments.
# With the grid's 65000-byte MTU, the host default the namespaces inherit (tcp_rmem[1] =
# 131072, a ~64 KB window) holds one segment and a half, and Linux's receive autotuning
# then often never starts: the window stays at 2 x 46080 bytes (the sender halves its MSS
# to fit it) and a 20 ms path carries 70 Mbit/s for the whole run, whatever the link rate.
# 16 x MTU keeps the ratio the default has at a 9000-byte MTU (131072 / 9000 = 14.6).
INITIAL_RCVBUF_SEGMENTS = 16


def _etc_files(topo: Topology, st: dict[str, Any]) -> None:
    """/etc/netns/<ns>/{hosts,resolv.conf}, bind-mounted by `ip netns exec`: testbed names
    resolve inside the hosts, and DNS fails at once (no 5 s resolver timeouts)."""
    names = "".join(f"{h.address}\t{h.name}\n" for h in topo.hosts)
    own = {st["hosts"][h.name]["netns"]: h.address for h in topo.hosts}
    me = socket.gethostname()     # servers (xrootd) resolve their own host name at start-up
    for ns in st["namespaces"]:
        d = netns.ETC_NETNS / ns
        d.mkdir(parents=True, exist_ok=True)
        (d / "hosts").write_text(f"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n"
                                 f"{own.get(ns, str(ROUTER_ADDR))}\t{me}\n{names}")
        (d / "resolv.conf").write_text("# gridxfer testbed: no DNS inside the grid\n"
                                       "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")


def build_network(topo: Topology, st: dict[str, Any], save: Callable[[dict], None]) -> None:
    """Router, hosts, controller link, policy routing and WAN links; ``save`` records
    progress in the state file as it goes."""
    router = st["router"]
    _etc_files(topo, st)
    netns.add(router)
    for key, val in (("net.ipv4.ip_forward", "1"), ("net.ipv4.conf.all.rp_filter", "0"),
                     ("net.ipv4.conf.default.rp_filter", "0")):
        netns.sysctl(router, key, val)
    tier_index = {t.name: i for i, t in enumerate(topo.tiers)}
    tier_ifaces: dict[str, list[str]] = {t.name: [] for t in topo.tiers}
    for i, host in enumerate(topo.hosts):
        ns, vdev = st["hosts"][host.name]["netns"], f"vh{i}"
        st["hosts"][host.name]["router_dev"] = vdev
        netns.add(ns)
        initial_rcvbuf(ns)
        netns.ip(router, "link", "add", vdev, "mtu", MTU, "type", "veth", "peer", "name", "eth0",
                 "mtu", MTU, "netns", ns)
        _attach(router, vdev, ns, "eth0", host.address)
        if host.rate_bps:
            wanlink.htb(router, vdev, host.rate_bps)
            wanlink.htb(ns, "eth0", host.rate_bps)
        tier_ifaces[host.tier].append(vdev)
    if topo.controller:
        rdev = st["root_links"][0]
        netns.ip(None, "link", "add", rdev, "mtu", MTU, "type", "veth", "peer", "name", "vctl",
                 "mtu", MTU, "netns", router)
        _attach(router, "vctl", None, rdev, str(topo.controller_address()))
        for tier in topo.tiers:
            netns.ip(None, "route", "replace", tier.subnet, "via", str(ROUTER_ADDR), "dev", rdev)
        tier_ifaces[topo.controller].append("vctl")
    for tier in topo.tiers:
        for dev in tier_ifaces[tier.name]:
            netns.ip(router, "rule", "add", "iif", dev, "lookup",
                     str(TABLE_BASE + tier_index[tier.name]), "pref", "100")
    def delayline(dev: str, delay: float, loss: float) -> None:
        _start_delayline(st, dev, delay, loss, save)

    for k, link in enumerate(topo.links):
        for src, dst, suffix in ((link.a, link.b, "a"), (link.b, link.a, "b")):
            method = wanlink.method_for(link, st.get("netem", False))
            dev = f"tl{k}{suffix}"
            rec: dict[str, Any] = {"dev": dev, "from": src, "to": dst, "rate_bps": link.rate_bps,
                   "rtt_s": link.rtt_s, "loss": link.loss, "method": method}
            st["links"].append(rec)
            save(st)
            rec.update(wanlink.build(router, dev, link, method,
                                     TABLE_BASE + tier_index[src], topo.tier(dst).subnet,
                                     delayline))
    save(st)


def initial_rcvbuf(ns: str) -> str:
    """Raise only the default (middle) value of ``ns``'s tcp_rmem, which the namespace
    inherited from the host, to ``INITIAL_RCVBUF_SEGMENTS`` x MTU (never above its max);
    min and max stay the host's. Returns the value now in force."""
    low, default, high = (int(v) for v in netns.read_sysctl(ns, "net.ipv4.tcp_rmem").split())
    want = min(max(default, INITIAL_RCVBUF_SEGMENTS * int(MTU)), high)
    if want != default:
        netns.sysctl(ns, "net.ipv4.tcp_rmem", f"{low} {want} {high}")
    return f"{low} {want} {high}"


def _attach(router: str, rdev: str, ns: str | None, dev: str, address: str) -> None:
    """Point-to-point addressing: host /32 with the router (198.18.0.1) as peer."""
    netns.ip(ns, "addr", "add", address, "peer", str(ROUTER_ADDR), "dev", dev)
    netns.ip(ns, "link", "set", dev, "up")
    if ns is not None:
        netns.ip(ns, "route", "add", "default", "via", str(ROUTER_ADDR), "dev", dev)
    netns.ip(router, "addr", "add", str(ROUTER_ADDR), "peer", address, "dev", rdev)
    netns.ip(router, "link", "set", rdev, "up")


def _start_delayline(st: dict[str, Any], tun: str, delay: float, loss: float,
                     save: Callable[[dict], None]) -> None:
    pid = wanlink.spawn_delayline(st["router"], tun, delay, loss,
                                  testbed_dir() / f"delayline-{tun}.log")
    st["pids"][f"delayline-{tun}"] = pid
    save(st)
