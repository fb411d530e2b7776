"""One direction of an emulated WAN link inside the router namespace.

Three ways to build it, chosen per direction by :func:`method_for`:

* ``delayline`` - a TUN device ``tl<k><a|b>`` with tc htb (rate); the userspace delay line
  (:mod:`gridxfer.testbed.delayline`) adds RTT/2 and the loss. Used when the kernel has no
  ``sch_netem`` (as on this project's machines).
* ``netem`` - a veth loop ``tl<k><x>`` -> ``tr<k><x>`` with htb (rate) and a netem leaf
  (delay RTT/2, loss); packets re-enter the router from ``tr<k><x>``. Used where tc has netem.
* ``veth`` - the same veth loop with htb only, for links with no RTT and no loss.

In every case the tier's policy-routing table sends the other tier's subnet into the
device, and traffic coming back out of it is routed by the main table.
"""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from gridxfer.testbed import netns
from gridxfer.testbed.topology import Link

MTU = "65000"
LOOP_NEXTHOP = "198.18.0.2"      # fictitious next hop on veth loops (static neighbour)
FORCE_ENV = "GRIDXFER_WAN_EMULATION"   # "delayline" forces the delay line even with netem


def method_for(link: Link, netem: bool) -> str:
    if link.rtt_s == 0 and link.loss == 0:
        return "veth"
    if netem and os.environ.get(FORCE_ENV, "") != "delayline":
        return "netem"
    return "delayline"


def htb(ns: str | None, dev: str, rate_bps: float) -> None:
    """Rate limit on ``dev``'s egress: htb class 1:1, a byte FIFO of ~50 ms under it."""
    rate = f"{int(rate_bps)}bit"
    burst = str(max(int(rate_bps / 8 * 0.002), 2 * 65536))
    limit = str(max(int(rate_bps / 8 * 0.05), 4 * 65536))
    netns.tc(ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1")
    netns.tc(ns, "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", rate,
             "ceil", rate, "burst", burst, "cburst", burst, "quantum", "131072")
    netns.tc(ns, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "bfifo",
             "limit", limit)


def netem_args(link: Link) -> list[str]:
    """The netem leaf for one direction: half the RTT, the loss, a deep queue."""
    args = ["netem", "delay", f"{link.rtt_s / 2 * 1e6:.0f}us", "limit", "100000"]
    if link.loss:
        args += ["loss", f"{link.loss * 100:.6g}%"]
    return args


def build(router: str, dev: str, link: Link, method: str, table: int, dst_subnet: str,
          start_delayline: Callable[[str, float, float], None]) -> dict[str, Any]:
    """Create one direction; returns what the state file records about it."""
    if method == "delayline":
        netns.ip(router, "tuntap", "add", "dev", dev, "mode", "tun")
        netns.ip(router, "link", "set", dev, "mtu", MTU, "txqueuelen", "1000", "up")
        if link.rate_bps:
            htb(router, dev, link.rate_bps)
        netns.ip(router, "route", "add", dst_subnet, "dev", dev, "table", str(table))
        start_delayline(dev, link.rtt_s / 2.0, link.loss)
        return {"dev": dev, "method": method}
    peer = "tr" + dev[2:]
    netns.ip(router, "link", "add", dev, "mtu", MTU, "type", "veth", "peer", "name", peer,
             "mtu", MTU)
    for d in (dev, peer):
        netns.ip(router, "link", "set", d, "up")
    mac = (
        netns.ip(router, "-o", "link", "show", "dev", peer)
        .stdout.split("link/ether ")[1]
        .split()[0]
    )
    netns.ip(router, "neigh", "replace", LOOP_NEXTHOP, "lladdr", mac, "dev", dev,
             "nud", "permanent")
    netns.ip(router, "route", "add", dst_subnet, "via", LOOP_NEXTHOP, "dev", dev, "onlink",
             "table", str(table))
    if link.rate_bps:
        htb(router, dev, link.rate_bps)
        if method == "netem":
            netns.tc(router, "qdisc", "replace", "dev", dev, "parent", "1:1", "handle", "10:",
                     *netem_args(link))
    elif method == "netem":
        netns.tc(router, "qdisc", "add", "dev", dev, "root", "handle", "1:", *netem_args(link))
    return {"dev": dev, "peer": peer, "method": method}


def spawn_delayline(router: str, dev: str, delay: float, loss: float, log_path) -> int:
    """Start the delay line for TUN ``dev`` in the router namespace; returns its pid."""
    with open(log_path, "ab") as fh:
        proc = subprocess.Popen(
            [*netns.wrap(router), sys.executable, "-m", "gridxfer.testbed.delayline",
             "--dev", dev, "--delay", repr(delay), "--loss", repr(loss)],
            stdin=subprocess.DEVNULL, stdout=fh, stderr=fh, start_new_session=True)
    return proc.pid
