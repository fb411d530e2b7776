"""The campaign file's settings beside source and destinations: ``checksum``, ``retries``,
``circuit_breaker``, ``on_pool_down`` (each read from its YAML node, errors naming
``file:line`` and the field)."""
from __future__ import annotations

import difflib

from yaml.nodes import Node, ScalarNode

from gridxfer import limits, units
from gridxfer.campaign.spec.model import (
    ALGORITHMS, VERIFY_MODES, ChecksumSpec, CircuitSpec, RetrySpec)
from gridxfer.campaign.spec.nodes import Checker

MIN_COOLDOWN = 1.0                          # s: circuit_breaker.*, on_pool_down.wait
POOL_DOWN_WAIT_DEFAULT = 3600.0             # on_pool_down: wait


def retries(c: Checker, node: Node) -> RetrySpec:
    m = c.keys(node, "retries", ("max", "backoff"))
    r = RetrySpec(
        max=c.check(lambda: c.integer(m["max"], "retries.max", minimum=0,
                                      limit=limits.MAX_RETRIES), 3) if "max" in m else 3,
        backoff=c.check(lambda: c.parsed(m["backoff"], "retries.backoff", units.parse_duration,
                                         limit=limits.MAX_DURATION), 30.0)
        if "backoff" in m else 30.0)
    last_wait(c, node, r)
    return r


def last_wait(c: Checker, node: Node, r: RetrySpec) -> None:
    """The backoff doubles after each attempt: the last wait must stay bounded too."""
    wait = r.backoff * 2.0 ** (r.max - 1) if r.max else 0.0
    msg = limits.MAX_RETRY_WAIT.above(wait, units.fmt_duration(wait))
    if msg:
        raise c.fail(node, "retries", f"backoff {r.backoff:g}s doubled {r.max - 1} times waits "
                                      f"{msg}; lower max or backoff")


def _seconds(c: Checker, node: Node, where: str, limit: limits.Limit) -> float:
    val = c.parsed(node, where, units.parse_duration, limit=limit)
    if val < MIN_COOLDOWN:
        raise c.fail(node, where,
                     f"must be at least {MIN_COOLDOWN:g}s, got {c.value(node, where)!r}")
    return val


def circuit(c: Checker, node: Node) -> CircuitSpec:
    m = c.keys(node, "circuit_breaker", ("cooldown", "max_cooldown"))
    cooldown = (_seconds(c, m["cooldown"], "circuit_breaker.cooldown", limits.MAX_COOLDOWN)
                if "cooldown" in m else CircuitSpec.cooldown)
    if "max_cooldown" not in m:
        return CircuitSpec(cooldown, max(cooldown, CircuitSpec.max_cooldown))
    top = _seconds(c, m["max_cooldown"], "circuit_breaker.max_cooldown", limits.MAX_MAX_COOLDOWN)
    if top < cooldown:
        raise c.fail(m["max_cooldown"], "circuit_breaker.max_cooldown",
                     f"{units.fmt_duration(top)} is below cooldown {units.fmt_duration(cooldown)}")
    return CircuitSpec(cooldown, top)


def on_pool_down(c: Checker, node: Node) -> float:
    """Seconds to wait for a tier whose whole pool is down; 0.0 = fail its files."""
    if isinstance(node, ScalarNode):
        action = c.string(node, "on_pool_down")
        if action in ("fail", "wait"):
            return 0.0 if action == "fail" else POOL_DOWN_WAIT_DEFAULT
        raise c.fail(node, "on_pool_down", f"must be fail, wait or {{wait: <duration>}}, "
                                           f"got {action!r}")
    m = c.mapping(node, "on_pool_down", ("wait",), required=("wait",))
    return _seconds(c, m["wait"], "on_pool_down.wait", limits.MAX_DURATION)


def checksum(c: Checker, node: Node) -> ChecksumSpec:
    if isinstance(node, ScalarNode) and c.value(node, "checksum") in (False, None, "none"):
        return ChecksumSpec(algorithm=None, verify="none")
    m = c.keys(node, "checksum", ("algorithm", "verify"))
    algo = c.check(lambda: _algorithm(c, m["algorithm"]), "adler32") if "algorithm" in m \
        else "adler32"
    verify = c.check(lambda: verify_mode(c, m["verify"], "checksum.verify"), "both") \
        if "verify" in m else "both"
    return ChecksumSpec(algorithm=algo, verify=verify)


def _algorithm(c: Checker, node: Node) -> str:
    algo = c.string(node, "checksum.algorithm").lower()
    if algo not in ALGORITHMS:
        raise c.fail(node, "checksum.algorithm",
                     f"unsupported algorithm {algo!r} (use {', '.join(ALGORITHMS)})")
    return algo


def verify_mode(c: Checker, node: Node, where: str) -> str:
    verify = c.string(node, where).lower()
    verify = "destination" if verify == "target" else verify      # FTS3's word for it
    if verify not in VERIFY_MODES:
        hint = difflib.get_close_matches(verify, VERIFY_MODES, n=1)
        raise c.fail(node, where, "must be one of source, destination (FTS3: target), both, none"
                     + (f" (did you mean {hint[0]!r}?)" if hint else ""))
    return verify
