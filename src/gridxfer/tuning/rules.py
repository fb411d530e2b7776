"""Static rules for setting values: what a known key accepts, checked before anything is read.

Keys not listed here are still allowed (the kernel has hundreds); for those only the
target can say whether they exist, and the kernel whether a value is accepted.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

INT_MAX = 2**31 - 1

# Keys that belong to the initial network namespace only. Not the rule, only a hint: a netns
# target asks the kernel (targets/netns.py), and a remote target in a child namespace takes a
# key as global when the namespace shows it read-only, or lacks it and it is listed here.
GLOBAL_ONLY = frozenset({
    "net.core.rmem_max", "net.core.wmem_max", "net.core.rmem_default", "net.core.wmem_default",
    "net.core.netdev_max_backlog", "net.core.default_qdisc", "net.ipv4.tcp_mem",
    "net.ipv4.udp_mem", "net.core.optmem_max",
})

KNOWN_QDISCS = frozenset({"pfifo_fast", "fq", "fq_codel", "fq_pie", "pfifo", "bfifo", "sfq",
                          "cake", "codel", "pie", "htb", "tbf", "noqueue"})

SYSCTL_KEY_RE = re.compile(r"[a-z0-9_][a-z0-9_.\-/]*[a-z0-9_]", re.I | re.A)
WORD_RE = re.compile(r"[a-z0-9_\-]+", re.I | re.A)
INT_RE = re.compile(r"-?[0-9]+")


@dataclass(frozen=True)
class Rule:
    """``count`` integers each within [lo, hi]; ``ordered``: non-decreasing (tcp_rmem)."""

    count: int = 1
    lo: int = 0
    hi: int = INT_MAX
    ordered: bool = False
    word: bool = False      # a single word (congestion control, qdisc, on/off)
    choices: frozenset[str] | None = None


_BYTES = Rule(lo=1)
_TRIPLE = Rule(count=3, lo=1, ordered=True)
_BOOL = Rule(lo=0, hi=1)

SYSCTL_RULES: dict[str, Rule] = {
    "net.core.rmem_max": _BYTES, "net.core.wmem_max": _BYTES,
    "net.core.rmem_default": _BYTES, "net.core.wmem_default": _BYTES,
    "net.core.optmem_max": _BYTES,
    "net.core.netdev_max_backlog": Rule(lo=1),
    "net.core.netdev_budget": Rule(lo=1),
    "net.core.somaxconn": Rule(lo=0),
    "net.core.default_qdisc": Rule(word=True, choices=KNOWN_QDISCS),
    "net.ipv4.tcp_rmem": _TRIPLE, "net.ipv4.tcp_wmem": _TRIPLE,
    "net.ipv4.tcp_mem": _TRIPLE, "net.ipv4.udp_mem": _TRIPLE,
    "net.ipv4.udp_rmem_min": _BYTES, "net.ipv4.udp_wmem_min": _BYTES,
    "net.ipv4.tcp_congestion_control": Rule(word=True),
    "net.ipv4.tcp_timestamps": Rule(lo=0, hi=2),
    "net.ipv4.tcp_sack": _BOOL, "net.ipv4.tcp_dsack": _BOOL, "net.ipv4.tcp_fack": _BOOL,
    "net.ipv4.tcp_window_scaling": _BOOL,
    "net.ipv4.tcp_mtu_probing": Rule(lo=0, hi=2),
    "net.ipv4.tcp_no_metrics_save": _BOOL,
    "net.ipv4.tcp_slow_start_after_idle": _BOOL,
    "net.ipv4.tcp_moderate_rcvbuf": _BOOL,
    "net.ipv4.tcp_low_latency": _BOOL,
    "net.ipv4.tcp_adv_win_scale": Rule(lo=-31, hi=31),
}

_ONOFF = Rule(word=True, choices=frozenset({"on", "off"}))
_RING = Rule(lo=1, hi=1 << 20)
NIC_RULES: dict[str, Rule] = {
    "txqueuelen": Rule(lo=0, hi=2**32 - 1),
    "mtu": Rule(lo=68, hi=65535),
    "ring.rx": _RING, "ring.tx": _RING, "ring.rx-mini": _RING, "ring.rx-jumbo": _RING,
    "pause.autoneg": _ONOFF, "pause.rx": _ONOFF, "pause.tx": _ONOFF,
    "coalesce.adaptive-rx": _ONOFF, "coalesce.adaptive-tx": _ONOFF,
    **{f"coalesce.{p}": Rule(lo=0, hi=2**32 - 1) for p in (
        "rx-usecs", "rx-frames", "tx-usecs", "tx-frames", "rx-usecs-irq", "rx-frames-irq",
        "tx-usecs-irq", "tx-frames-irq")},
}


def check_value(rule: Rule, value: str) -> str | None:
    """None if ``value`` satisfies ``rule``, else a short reason."""
    parts = value.split()
    if rule.word:
        if len(parts) != 1 or not WORD_RE.fullmatch(parts[0]):
            return f"expected one word, got {value!r}"
        if rule.choices is not None and parts[0].lower() not in rule.choices:
            return f"{value!r} is not one of {', '.join(sorted(rule.choices))}"
        return None
    if len(parts) != rule.count:
        return f"expected {rule.count} integer(s), got {value!r}"
    nums = []
    for part in parts:
        if not INT_RE.fullmatch(part):      # int() takes '1_000', '+5', other scripts' digits
            return f"not numeric: {part!r}"
        if len(part) > 20:
            return f"{part[:12]}... out of range [{rule.lo}, {rule.hi}]"
        nums.append(int(part))
    for n in nums:
        if not rule.lo <= n <= rule.hi:
            return f"{n} out of range [{rule.lo}, {rule.hi}]"
    if rule.ordered and nums != sorted(nums):
        return f"values must be non-decreasing (min default max), got {value!r}"
    return None


def _beyond_64_bits(token: str) -> bool:
    """An integer no sysctl can hold (they are at most 64-bit), any key."""
    return bool(INT_RE.fullmatch(token)) and (len(token) > 21 or not -2**63 <= int(token) < 2**64)


def check_sysctl(key: str, value: str) -> str | None:
    """Static check of a sysctl key/value; None when fine (or the key has no rule)."""
    if not SYSCTL_KEY_RE.fullmatch(key) or ".." in key:
        return f"not a sysctl key: {key!r}"
    if not value.strip():
        return "empty value"
    rule = SYSCTL_RULES.get(key)
    if rule is None:
        if "\n" in value:
            return "value spans lines"
        huge = next((t for t in value.split() if _beyond_64_bits(t)), None)
        return f"{huge[:12]}... is beyond any sysctl's 64 bits" if huge else None
    return check_value(rule, value)


def check_nic(param: str, value: str) -> str | None:
    rule = NIC_RULES.get(param)
    if rule is None:
        return f"unknown NIC setting {param!r} (known: {', '.join(sorted(NIC_RULES))})"
    return check_value(rule, value)
