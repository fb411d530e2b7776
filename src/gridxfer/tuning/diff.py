"""A profile against a target, key by key: ``diff`` reads every key at once and gives
each an ``Item`` (same, change, skipped or invalid, with the reason), and
``raise_invalid`` refuses the whole profile if any key is invalid, before anything is
written (``engine.py``'s all or nothing).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gridxfer.errors import UsageError
from gridxfer.tuning.profile import NIC_PREFIX, Profile
from gridxfer.tuning.settings import UNSUPPORTED, nic_key, read_values, same, split_nic_key
from gridxfer.tuning.targets.base import TuningTarget

SAME, CHANGE, SKIPPED, INVALID = "same", "change", "skipped", "invalid"
CC_KEY, CC_AVAIL = "net.ipv4.tcp_congestion_control", "net.ipv4.tcp_available_congestion_control"
LINK_RESETTING = ("mtu", "ring.")


class ValidationError(UsageError):
    """Some key cannot be applied; nothing was written (exit 2). ``items`` is the diff."""

    def __init__(self, message: str, items: Sequence[Item] = ()) -> None:
        super().__init__(message)
        self.items = tuple(items)


@dataclass(frozen=True)
class Item:
    key: str
    expected: str
    current: str | None
    status: str
    reason: str = ""
    where: str = ""


def diff(profile: Profile, target: TuningTarget, *, ifaces: Sequence[str] = (),
         skip_global: bool = False, force: bool = False) -> list[Item]:
    """Every setting of ``profile`` against ``target``: same / change / skipped / invalid."""
    wanted: list[tuple[str, str, bool, str]] = []       # resolved key, value, optional, where
    skipped: list[Item] = []
    for s in profile.settings:
        if not s.is_nic:
            wanted.append((s.key, s.value, s.optional, s.where))
        elif not ifaces:
            skipped.append(Item(s.key, s.value, None, SKIPPED, "no --iface given", s.where))
        else:
            wanted += [(nic_key(i, s.key[len(NIC_PREFIX):]), s.value, s.optional, s.where)
                       for i in ifaces]
    keys = [w[0] for w in wanted]
    has_cc = CC_KEY in keys
    current = read_values(target, keys + ([CC_AVAIL] if has_cc else []))
    scope = target.out_of_scope([k for k in keys if split_nic_key(k) is None])
    session = target.session_interfaces() if not force and any(
        split_nic_key(k) for k in keys) else frozenset()
    available = set((current.get(CC_AVAIL) or "").split())
    items = [_classify(k, v, opt, where, current.get(k), scope.get(k), skip_global, session,
                       available)
             for k, v, opt, where in wanted]
    return items + skipped


def _classify(key: str, value: str, optional: bool, where: str, cur: str | None,
              out_of_scope: str | None, skip_global: bool, session: frozenset[str],
              available: set[str]) -> Item:
    def bad(reason: str) -> Item:
        return Item(key, value, cur, SKIPPED if optional else INVALID, reason, where)

    nic = split_nic_key(key)
    if out_of_scope:
        if skip_global:
            return Item(key, value, cur, SKIPPED, out_of_scope, where)
        return bad(out_of_scope)
    if nic is None and cur is None:
        return bad("no such sysctl on this host")
    if cur == UNSUPPORTED:
        return Item(key, value, None, SKIPPED, "not supported by the device", where)
    if key == CC_KEY and value not in available:
        return bad(
            f"{value!r} not in tcp_available_congestion_control ({' '.join(sorted(available))})"
        )
    if same(cur, value):
        return Item(key, value, cur, SAME, "", where)
    if nic and nic[0] in session and nic[1].startswith(LINK_RESETTING):
        return Item(key, value, cur, INVALID,
                    f"{nic[0]} carries the SSH session and {nic[1]} can reset the link; "
                    "use --force", where)
    return Item(key, value, cur, CHANGE, "", where)


def raise_invalid(items: Sequence[Item], label: str) -> None:
    bad = [i for i in items if i.status == INVALID]
    scope = [i for i in bad if i.reason.startswith("global")]
    if scope:
        keys = ", ".join(f"{i.key} ({i.where})" if i.where and i.where != i.key else i.key
                         for i in scope)
        raise ValidationError(f"{label}: {len(scope)} global-only key(s) belong to the whole "
                              f"host, not to this network namespace: {keys}; use --skip-global "
                              "to skip them; nothing written", items)
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        first = bad[0]
        raise ValidationError(
            f"{first.where + ': ' if first.where and first.where != first.key else ''}"
            f"{first.key} = {first.expected}: {first.reason}{more}; nothing written",
            items,
        )
