"""The campaign file's ``destinations``: one tier per item (name, pool, streams, slots,
selector), each key checked on its own so that every error is reported in one run."""
from __future__ import annotations

import difflib
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from yaml.nodes import Node, ScalarNode, SequenceNode

from gridxfer import limits, units
from gridxfer.campaign.journal.store import _NAME_RE
from gridxfer.campaign.spec.model import TierSpec, TokenSpec
from gridxfer.campaign.spec.nodes import Checker, _kind
from gridxfer.campaign.spec import aliases, tape
from gridxfer.campaign.spec.tokens import pool_entry, token_spec

KEYS = ("tier", "pool", "streams", "max_active", "min_active", "tcp_buffer", "selector",
        "archive", "token", "nostreams", "priority")


def destinations(c: Checker, node: Node, base_dir: Path,
                 streams: int = 1) -> tuple[TierSpec, ...]:
    """The tiers; ``streams``: the default of a tier that sets none (top-level nostreams)."""
    if not isinstance(node, SequenceNode):
        raise c.fail(node, "destinations", f"expected a list of tiers, got {_kind(node)}")
    if not node.value:
        raise c.fail(node, "destinations", "at least one destination tier is needed")
    tiers: list[TierSpec] = []
    for i, tnode in enumerate(node.value):
        tier = c.check(partial(_tier, c, tnode, f"destinations[{i}]", tiers, base_dir, streams),
                       None)
        if tier is not None:
            tiers.append(tier)
    total = sum(t.max_active for t in tiers if not t.auto_ceiling)
    msg = limits.MAX_ACTIVE_TOTAL.above(total, f"the tiers' max_active add up to {total}, which")
    if msg:
        raise c.fail(node, "destinations", msg)
    return tuple(tiers)


def _tier(c: Checker, tnode: Node, where: str, tiers: list[TierSpec],
          base_dir: Path, streams: int) -> TierSpec | None:
    m = c.keys(tnode, where, KEYS, required=("tier", "pool"))
    label = {"streams": "streams", "max_active": "max_active", "min_active": "min_active"}
    if "nostreams" in m:                # FTS3's name
        if "streams" in m:
            c.record(c.fail(m["nostreams"], f"{where}.nostreams",
                            "give streams or nostreams (FTS3's name), not both"))
        else:
            m["streams"], label["streams"] = m.pop("nostreams"), "nostreams"
    name = c.check(lambda: _name(c, m["tier"], f"{where}.tier", tiers), None) \
        if "tier" in m else None
    eps: list[tuple[str, TokenSpec]] = []
    pool = c.check(lambda: _pool(c, m["pool"], f"{where}.pool", base_dir, eps), None) \
        if "pool" in m else None
    kw: dict[str, Any] = {"endpoint_tokens": tuple(eps), "streams": streams}
    if "priority" in m:
        prio = c.check(partial(aliases.priority, c, m["priority"], f"{where}.priority"), None)
        if prio is not None:
            kw["priority"] = prio
    if "token" in m:
        kw["token"] = c.check(lambda: token_spec(c, m["token"], f"{where}.token", base_dir), None)
    for key, bound in (("streams", limits.MAX_STREAMS), ("max_active", limits.MAX_ACTIVE),
                       ("min_active", limits.MAX_ACTIVE)):
        if key in m:
            num = c.check(partial(c.integer, m[key], f"{where}.{label[key]}", minimum=1,
                                  limit=bound), None)
            if num is not None:
                kw[key] = num
    if "tcp_buffer" in m:
        val = c.check(lambda: c.parsed(m["tcp_buffer"], f"{where}.tcp_buffer", units.parse_size,
                                       positive=True, limit=limits.MAX_TCP_BUFFER), None)
        if val is not None:
            kw["tcp_buffer"] = val
    if "selector" in m:
        sel = c.check(lambda: _selector(c, m["selector"], f"{where}.selector"), None)
        if sel is not None:
            kw["selector"] = sel
    if "archive" in m:
        arch = c.check(lambda: tape.archive_timeout(c, m["archive"], f"{where}.archive"), None)
        if arch is not None:
            kw["archive_timeout"] = arch
    if name is None or pool is None:
        return None
    if "max_active" not in m:
        kw["auto_ceiling"] = True       # the run picks the ceiling (engine/ceilings.py)
    tier = TierSpec(name=name, pool=pool, **kw)
    if "max_active" in kw and "min_active" not in kw:
        tier = replace(tier, min_active=min(tier.min_active, tier.max_active))
    if tier.min_active > tier.max_active and not tier.auto_ceiling:
        raise c.fail(m.get("min_active", tnode), f"{where}.min_active",
                     f"min_active {tier.min_active} is above max_active {tier.max_active}")
    return tier


def _name(c: Checker, node: Node, where: str, tiers: list[TierSpec]) -> str:
    name = c.string(node, where)
    if not _NAME_RE.fullmatch(name):
        raise c.fail(node, where, f"bad tier name {name!r}")
    if any(t.name == name for t in tiers):
        raise c.fail(node, where, f"duplicate tier {name!r}")
    return name


def _pool(c: Checker, pnode: Node, where: str, base_dir: Path,
          eps: list[tuple[str, TokenSpec]]) -> tuple[str, ...] | None:
    """The pool's URLs; a ``{url, token}`` entry's token source goes to ``eps``."""
    if isinstance(pnode, ScalarNode):
        pool_nodes = [pnode]
    elif isinstance(pnode, SequenceNode):
        pool_nodes = list(pnode.value)
    else:
        raise c.fail(pnode, where, f"expected a list of URLs, got {_kind(pnode)}")
    if not pool_nodes:
        raise c.fail(pnode, where, "the pool is empty")
    pool: list[str] = []
    ok = True
    for j, entry in enumerate(pool_nodes):
        got = c.check(partial(pool_entry, c, entry, f"{where}[{j}]", base_dir), None)
        if got is None:
            ok = False
            continue
        p, ep_token = got
        u = c.check(partial(c.url, p, f"{where}[{j}]"), None)
        if u is not None:
            c.check(partial(c.given_name, entry, u, f"{where}[{j}]"), None)
        if u is not None and ep_token is not None:
            eps.append((u, ep_token))
        if u is None:
            ok = False
        elif u in pool:
            c.record(c.fail(p, f"{where}[{j}]", f"duplicate endpoint {u!r}"))
            ok = False
        else:
            pool.append(u)
    return tuple(pool) if ok else None


def _selector(c: Checker, node: Node, where: str) -> str:
    name = c.string(node, where)
    from gridxfer.campaign.policy.selection import SELECTORS
    if name not in SELECTORS:
        hint = difflib.get_close_matches(name, list(SELECTORS), n=1)
        raise c.fail(node, where, f"unknown selector {name!r}"
                     + (f" (did you mean {hint[0]!r}?)" if hint
                        else f" (choose from {', '.join(sorted(SELECTORS))})"))
    return name
