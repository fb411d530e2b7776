"""FTS3's names for the same settings, accepted beside gridxfer's own (issue 22), and the
FTS3-only settings gridxfer now knows: ``priority``, ``activity`` with its shares of a
link's slots, ``job_metadata``.

``FTS3_KEYS`` is the map the README shows ("FTS3 names in a campaign file"); a unit test
keeps the two in step. Giving a setting under both names is an error naming both.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

from yaml.nodes import MappingNode, Node, ScalarNode

from gridxfer import limits, units
from gridxfer.redact import WHERE_CREDENTIALS_GO, redact
from gridxfer.campaign.spec.model import ChecksumSpec, RetrySpec
from gridxfer.campaign.spec.nodes import Checker, _kind
from gridxfer.campaign.spec import options


@dataclass(frozen=True)
class Alias:
    fts3: str           # the key as FTS3 users write it
    gridxfer: str       # where it lands in a gridxfer campaign file
    note: str


FTS3_KEYS = (
    Alias("verify_checksum", "checksum.verify",
          "source | target | both | none (target = destination; true = both, false = none)"),
    Alias("nostreams", "streams", "per tier; at the top level, the default of every tier"),
    Alias("retry", "retries.max", "retries per file after the first attempt"),
    Alias("retry_delay", "retries.backoff",
          "seconds before the first retry; gridxfer doubles it after each retry"),
    Alias("priority", "priority", "1-5 (default 3): top level, per tier, per file"),
    Alias("activity", "activity", "top level (default `default`) and per file"),
    Alias("activity_shares", "activity_shares",
          "weights per activity of each link's slots, as FTS3's activity shares"),
    Alias("job_metadata", "job_metadata", "any value; kept in the journal, shown by report"),
)
TOP = ("verify_checksum", "nostreams", "retry", "retry_delay", "priority", "activity",
       "activity_shares", "job_metadata")
_FTS3_VERIFY = {"target": "destination", True: "both", False: "none"}
_ACTIVITY = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}")
MAX_METADATA = 4096         # characters of job_metadata as JSON (FTS3 stores it in a column)


def _has(node: Node | None, key: str) -> bool:
    return isinstance(node, MappingNode) and any(
        isinstance(k, ScalarNode) and k.value == key for k, _ in node.value)


def both(c: Checker, node: Node, alias: str, own: str) -> None:
    raise c.fail(node, alias, f"give {own} or {alias} (FTS3's name), not both")


def verify_checksum(c: Checker, top: dict[str, Node], checksum: ChecksumSpec) -> ChecksumSpec:
    """``verify_checksum`` (FTS3) over ``checksum``: its verify mode."""
    node = top["verify_checksum"]
    if _has(top.get("checksum"), "verify"):
        both(c, node, "verify_checksum", "checksum.verify")
    raw = c.value(node, "verify_checksum")
    mode = _FTS3_VERIFY.get(raw) if isinstance(raw, bool) else None
    if mode is None:
        mode = options.verify_mode(c, node, "verify_checksum")
    if mode == "none":
        return ChecksumSpec(algorithm=None, verify="none")
    if "checksum" in top and checksum.algorithm is None:
        raise c.fail(node, "verify_checksum", f"{raw!r} contradicts checksum: none")
    return replace(checksum, algorithm=checksum.algorithm or "adler32", verify=mode)


def retry(c: Checker, top: dict[str, Node], retries: RetrySpec) -> RetrySpec:
    """``retry`` and ``retry_delay`` (FTS3) over ``retries.max`` and ``retries.backoff``."""
    out = retries
    if "retry" in top:
        if _has(top.get("retries"), "max"):
            both(c, top["retry"], "retry", "retries.max")
        out = replace(out, max=c.integer(top["retry"], "retry", minimum=0,
                                         limit=limits.MAX_RETRIES))
    if "retry_delay" in top:
        if _has(top.get("retries"), "backoff"):
            both(c, top["retry_delay"], "retry_delay", "retries.backoff")
        out = replace(out, backoff=c.parsed(top["retry_delay"], "retry_delay",
                                            units.parse_duration, limit=limits.MAX_DURATION))
    options.last_wait(c, top.get("retry") or top["retry_delay"], out)
    return out


def priority(c: Checker, node: Node, where: str) -> int:
    val = c.integer(node, where, minimum=1)
    if val > 5:
        raise c.fail(node, where, f"must be 1 (lowest) to 5 (highest), as in FTS3, got {val}")
    return val


def activity(c: Checker, node: Node, where: str) -> str:
    name = c.string(node, where)
    if not _ACTIVITY.fullmatch(name):
        raise c.fail(node, where, f"bad activity {name!r}: letters, digits, spaces, '.', '_' "
                                  f"and '-' (max 64)")
    return name


def activity_shares(c: Checker, node: Node) -> tuple[tuple[str, float], ...]:
    """``{Express: 3, default: 1}``: weights of each link's slots per activity."""
    if not isinstance(node, MappingNode) or not node.value:
        raise c.fail(node, "activity_shares",
                     f"expected a mapping of activity: weight, got {_kind(node)}")
    out: dict[str, float] = {}
    for knode, vnode in node.value:
        name = activity(c, knode, "activity_shares")
        where = f"activity_shares.{name}"
        if name in out:
            raise c.fail(knode, where, "duplicate activity")
        weight = c.value(vnode, where)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight > 0:
            raise c.fail(vnode, where, f"expected a weight above zero, got {weight!r}")
        out[name] = float(weight)
    return tuple(sorted(out.items()))


def job_metadata(c: Checker, node: Node) -> str:
    """Any YAML value, kept as canonical JSON; refused if it carries a credential."""
    try:
        value = c.construct(node)
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError) as exc:
        raise c.fail(node, "job_metadata", f"not a plain value: {exc}") from None
    if len(text) > MAX_METADATA:
        raise c.fail(node, "job_metadata", f"{len(text)} characters as JSON; at most "
                                           f"{MAX_METADATA}")
    if redact(text) != text:
        raise c.fail(node, "job_metadata", f"carries a credential: {WHERE_CREDENTIALS_GO}")
    return text
