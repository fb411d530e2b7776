"""The tape parts of a campaign file: a tape-backed destination tier and a tape source.

```yaml
source:
  url: root://t0-tape.example//store/raw/
  files: {glob: "*.root"}
  bring_online: {timeout: 8h, pin_lifetime: 2h}   # FTS3: bring_online, copy_pin_lifetime
destinations:
  - tier: T1-CNAF
    pool: [root://t1-tape.example//data/]
    archive: {timeout: 4h}                        # FTS3: archive_timeout
```

``archive`` is named for what the storage does (it archives the file to tape; XRootD's
and CTA's own word, and FTS3's ``archive_timeout``); ``timeout`` is the only key, so a
tier later gets more archive settings without a rename. Both keys take a duration.
"""
from __future__ import annotations

from yaml.nodes import MappingNode, Node, ScalarNode

from gridxfer import limits, units
from gridxfer.campaign.spec.model import StagingSpec
from gridxfer.campaign.spec.nodes import Checker

MIN_TAPE_WAIT = 1.0          # s: the shortest archive or staging timeout, and pin lifetime
PIN_LIFETIME_DEFAULT = 3600.0


def key_node(node: Node, key: str) -> Node | None:
    """The value node of ``key`` in a mapping node (already validated), or None."""
    if isinstance(node, MappingNode):
        for k, v in node.value:
            if isinstance(k, ScalarNode) and k.value == key:
                return v
    return None


def _duration(c: Checker, node: Node, where: str) -> float:
    val = c.parsed(node, where, units.parse_duration, limit=limits.MAX_DURATION)
    if val < MIN_TAPE_WAIT:
        raise c.fail(node, where, f"must be at least {MIN_TAPE_WAIT:g}s, got "
                                  f"{c.value(node, where)!r}")
    return val


def archive_timeout(c: Checker, node: Node, where: str) -> float:
    """``archive: {timeout: <duration>}`` -> seconds."""
    if isinstance(node, ScalarNode):
        raise c.fail(node, where, "expected {timeout: <duration>}, e.g. {timeout: 4h}")
    m = c.mapping(node, where, ("timeout",), required=("timeout",))
    return _duration(c, m["timeout"], f"{where}.timeout")


def bring_online(c: Checker, node: Node, where: str) -> StagingSpec:
    """``bring_online: {timeout: <duration>, pin_lifetime: <duration>}``."""
    if isinstance(node, ScalarNode):
        raise c.fail(node, where, "expected {timeout: <duration>, pin_lifetime: <duration>}")
    m = c.mapping(node, where, ("timeout", "pin_lifetime"), required=("timeout",))
    timeout = _duration(c, m["timeout"], f"{where}.timeout")
    pin = (_duration(c, m["pin_lifetime"], f"{where}.pin_lifetime") if "pin_lifetime" in m
           else PIN_LIFETIME_DEFAULT)
    return StagingSpec(timeout=timeout, pin_lifetime=pin)
