"""Grid-in-a-box topology files: tiers of hosts joined by emulated WAN links.

A topology is YAML::

    name: sc                          # short name; namespaces are gx-<name>-<host>
    controller: T0                    # tier the root namespace joins (campaigns run there)
    tiers:
      - name: T0
        subnet: 198.18.1.0/24         # optional; default 198.18.<n>.0/24
        hosts:
          - {name: t0-se01, role: storage}                 # services default: xrootd, gridftp
          - {name: t1a-se02, role: storage, rate: 200Mbit} # a slow host (NIC-rate limit)
    links:
      - {between: [T0, T1-A], rate: 1Gbit, rtt: 18ms, loss: 0.01%}

Every address lies in 198.18.0.0/15 (RFC 2544 benchmarking range); nothing else is
accepted. Errors are :class:`SpecError` naming ``file:line`` and the field.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gridxfer.errors import SpecError, UsageError
from gridxfer.inputs import parse_yaml, read_text
from gridxfer.units import parse_bitrate, parse_duration
from gridxfer.testbed.topoyaml import Ctx, LDict, Loader

BENCH_NET = ipaddress.IPv4Network("198.18.0.0/15")
ROUTER_ADDR = ipaddress.IPv4Address("198.18.0.1")
ROLES = ("storage", "client")
SERVICES = ("xrootd", "xrootd-tape", "gridftp", "sshd")   # xrootd-tape: testbed/tapexrd
RESERVED = ("router", "probe")         # namespace names the grid uses itself
DEFAULT_SERVICES = {"storage": ("xrootd", "gridftp"), "client": ()}
_NAME_RE = re.compile(r"[a-z][a-z0-9-]{0,23}")
_TIER_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")
_TOP_KEYS = {"name", "controller", "tiers", "links"}
_TIER_KEYS = {"name", "subnet", "hosts"}
_HOST_KEYS = {"name", "role", "services", "address", "rate", "auth"}
AUTHS = ("none", "token")     # token: its xrootd needs a WLCG token (ztn + SciTokens, davs too)
_LINK_KEYS = {"between", "rate", "rtt", "loss"}


@dataclass(frozen=True)
class Host:
    name: str
    tier: str
    role: str
    services: tuple[str, ...]
    address: str
    rate_bps: float | None      # NIC-rate limit of this host (a "slow" host), None = unlimited
    auth: str = "none"          # "token": root:// and davs:// need the grid issuer's token


@dataclass(frozen=True)
class Tier:
    name: str
    subnet: str
    hosts: tuple[Host, ...]


@dataclass(frozen=True)
class Link:
    a: str                      # tier names
    b: str
    rate_bps: float | None      # None = unlimited
    rtt_s: float
    loss: float                 # fraction per packet, per direction (0.0001 = 0.01 %)


@dataclass(frozen=True)
class Topology:
    name: str
    controller: str | None      # tier the root namespace joins, None = not attached
    tiers: tuple[Tier, ...]
    links: tuple[Link, ...]
    source: str = ""

    @property
    def hosts(self) -> tuple[Host, ...]:
        return tuple(h for t in self.tiers for h in t.hosts)

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise UsageError(f"no host {name!r} in topology {self.name!r} "
                         f"(hosts: {', '.join(h.name for h in self.hosts)})")

    def tier(self, name: str) -> Tier:
        return next(t for t in self.tiers if t.name == name)

    def link_between(self, a: str, b: str) -> Link | None:
        for link in self.links:
            if {link.a, link.b} == {a, b}:
                return link
        return None

    def controller_address(self) -> str | None:
        if self.controller is None:
            return None
        net = ipaddress.ip_network(self.tier(self.controller).subnet)
        return str(net.broadcast_address - 1)


def _parse_loss(text: Any) -> float:
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        s = str(text).strip()
        value = float(s[:-1]) / 100.0 if s.endswith("%") else float(s)
    if not 0.0 <= value < 1.0:
        raise ValueError("loss must be within [0, 100 %)")
    return value


def _opt_rate(raw: Any) -> float | None:
    if raw in (None, 0, "0", "unlimited"):
        return None
    rate = parse_bitrate(raw)
    if rate < 1e5:
        raise UsageError("rate below 100 kbit/s")
    return rate


def parse(text: str, path: str = "<topology>") -> Topology:
    """Validate a topology document; raises :class:`SpecError` with file:line."""
    ctx = Ctx(path)
    doc = parse_yaml(lambda t: yaml.load(t, Loader=Loader), text, path)  # noqa: S506 - Safe
    if not isinstance(doc, dict):
        raise SpecError("a topology must be a mapping with 'tiers' and 'links'", path=path)
    doc = ctx.mapping(doc, _TOP_KEYS, "")
    name = str(ctx.need(doc, "name", ""))
    if not _NAME_RE.fullmatch(name) or len(name) > 10:
        raise ctx.err("must be 1-10 chars of [a-z0-9-], starting with a letter", doc, "name")
    raw_tiers = ctx.need(doc, "tiers", "")
    if not isinstance(raw_tiers, list) or not raw_tiers:
        raise ctx.err("must be a non-empty list", doc, "tiers")
    tiers: list[Tier] = []
    seen_hosts: dict[str, str] = {}
    used: set[ipaddress.IPv4Address] = {ROUTER_ADDR}
    subnets: list[ipaddress.IPv4Network] = []
    for ti, raw in enumerate(raw_tiers):
        where = f"tiers[{ti}]"
        ctx.mapping(raw, _TIER_KEYS, where, doc)
        tname = str(ctx.need(raw, "name", where))
        if not _TIER_RE.fullmatch(tname):
            raise ctx.err(f"bad tier name {tname!r}", raw, f"{where}.name")
        if any(t.name == tname for t in tiers):
            raise ctx.err(f"duplicate tier {tname!r}", raw, f"{where}.name")
        try:
            subnet = ipaddress.ip_network(str(raw.get("subnet") or f"198.18.{ti + 1}.0/24"))
        except ValueError as exc:
            raise ctx.err(str(exc), raw, f"{where}.subnet") from None
        if (not isinstance(subnet, ipaddress.IPv4Network) or not subnet.subnet_of(BENCH_NET)
                or ROUTER_ADDR in subnet or subnet.num_addresses < 8):
            raise ctx.err("must be a /29 or larger inside 198.18.0.0/15, not holding 198.18.0.1",
                          raw, f"{where}.subnet")
        if any(subnet.overlaps(s) for s in subnets):
            raise ctx.err(f"{subnet} overlaps another tier", raw, f"{where}.subnet")
        subnets.append(subnet)
        raw_hosts = ctx.need(raw, "hosts", where)
        if not isinstance(raw_hosts, list) or not raw_hosts:
            raise ctx.err("must be a non-empty list", raw, f"{where}.hosts")
        hosts = []
        for hi, rh in enumerate(raw_hosts):
            hw = f"{where}.hosts[{hi}]"
            hosts.append(_host(ctx, rh, hw, raw, tname, subnet, hi, seen_hosts, used))
        tiers.append(Tier(tname, str(subnet), tuple(hosts)))
    links = _links(ctx, doc, {t.name for t in tiers})
    controller = doc.get("controller", tiers[0].name)
    if controller is not None and (not isinstance(controller, str)
                                   or controller not in {t.name for t in tiers}):
        raise ctx.err(f"unknown tier {controller!r}", doc, "controller")
    return Topology(name, controller, tuple(tiers), links, source=path)


def _host(ctx: Ctx, rh: Any, hw: str, parent: Any, tier: str, subnet: ipaddress.IPv4Network,
          index: int, seen: dict[str, str], used: set) -> Host:
    ctx.mapping(rh, _HOST_KEYS, hw, parent)
    hname = str(ctx.need(rh, "name", hw))
    if not _NAME_RE.fullmatch(hname) or hname in RESERVED:
        raise ctx.err(f"bad host name {hname!r}: 1-24 chars of [a-z0-9-], starting with a "
                      f"letter, not {' or '.join(RESERVED)}", rh, f"{hw}.name")
    if hname in seen:
        raise ctx.err(f"duplicate host {hname!r} (also in tier {seen[hname]})", rh, f"{hw}.name")
    seen[hname] = tier
    role = str(rh.get("role", "storage"))
    if role not in ROLES:
        raise ctx.err(f"unknown role {role!r} (one of {', '.join(ROLES)})", rh, f"{hw}.role")
    services = rh.get("services", list(DEFAULT_SERVICES[role]))
    if not isinstance(services, list) or any(s not in SERVICES for s in services):
        raise ctx.err(f"must be a list of {', '.join(SERVICES)}", rh, f"{hw}.services")
    if len(set(services)) != len(services):
        raise ctx.err("duplicate service", rh, f"{hw}.services")
    if {"xrootd", "xrootd-tape"} <= set(services):
        raise ctx.err("xrootd and xrootd-tape share a port: one per host", rh, f"{hw}.services")
    try:
        addr = ipaddress.ip_address(str(rh.get("address") or subnet.network_address + 10 + index))
    except ValueError as exc:
        raise ctx.err(str(exc), rh, f"{hw}.address") from None
    if addr not in subnet or addr in (subnet.network_address, subnet.broadcast_address,
                                      subnet.broadcast_address - 1):
        raise ctx.err(f"{addr} is not a usable host address of tier subnet {subnet}",
                      rh, f"{hw}.address")
    if addr in used:
        raise ctx.err(f"address {addr} used twice", rh, f"{hw}.address")
    used.add(addr)
    try:
        rate = _opt_rate(rh.get("rate"))
    except UsageError as exc:
        raise ctx.err(str(exc), rh, f"{hw}.rate") from None
    auth = str(rh.get("auth", "none"))
    if auth not in AUTHS or (auth != "none" and "xrootd" not in services):
        raise ctx.err(f"auth must be {' or '.join(AUTHS)} (token: on a host with xrootd), "
                      f"got {auth!r}", rh, f"{hw}.auth")
    return Host(hname, tier, role, tuple(services), str(addr), rate, auth)


def _links(ctx: Ctx, doc: LDict, tier_names: set[str]) -> tuple[Link, ...]:
    raw_links = doc.get("links") or []
    if not isinstance(raw_links, list):
        raise ctx.err("must be a list", doc, "links")
    links: list[Link] = []
    for li, rl in enumerate(raw_links):
        lw = f"links[{li}]"
        ctx.mapping(rl, _LINK_KEYS, lw, doc)
        between = ctx.need(rl, "between", lw)
        if (not isinstance(between, list) or len(between) != 2 or between[0] == between[1]
                or any(b not in tier_names for b in between)):
            raise ctx.err(f"must name two different tiers of: {', '.join(sorted(tier_names))}",
                          rl, f"{lw}.between")
        if any({lk.a, lk.b} == set(between) for lk in links):
            raise ctx.err(f"duplicate link {between[0]}<->{between[1]}", rl, f"{lw}.between")
        try:
            rate = _opt_rate(rl.get("rate"))
        except UsageError as exc:
            raise ctx.err(str(exc), rl, f"{lw}.rate") from None
        try:
            rtt = parse_duration(rl.get("rtt", 0))
            if rtt > 5.0:
                raise UsageError("rtt above 5 s")
        except UsageError as exc:
            raise ctx.err(str(exc), rl, f"{lw}.rtt") from None
        try:
            loss = _parse_loss(rl.get("loss", 0))
        except (ValueError, OverflowError) as exc:     # OverflowError: an int past float
            raise ctx.err(f"bad loss {rl.get('loss')!r}: {exc} (try 0.01%)", rl,
                          f"{lw}.loss") from None
        links.append(Link(str(between[0]), str(between[1]), rate, rtt, loss))
    return tuple(links)


def load(path: str | Path) -> Topology:
    return parse(read_text(path), str(path))
