"""Settings as get/set pairs: sysctl keys, and NIC settings of one interface.

Resolved keys: a sysctl key as it is (``net.ipv4.tcp_rmem``), or ``nic[IFACE].PARAM`` for
``txqueuelen``/``mtu`` (``ip link``), ``ring.*`` (``ethtool -g/-G``), ``pause.*``
(``ethtool -a/-A``) and ``coalesce.*`` (``ethtool -c/-C``). A NIC setting the device does not
support reads as UNSUPPORTED and is skipped by the engine, not failed.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from gridxfer.errors import UsageError
from gridxfer.tuning.targets.base import TuningTarget, WriteFailed

UNSUPPORTED = "<unsupported>"
_NIC_KEY_RE = re.compile(r"nic\[([^\]]+)\]\.(.+)")

_RING_LABELS = {"rx": "RX", "tx": "TX", "rx-mini": "RX Mini", "rx-jumbo": "RX Jumbo"}
_PAUSE_LABELS = {"autoneg": "Autonegotiate", "rx": "RX", "tx": "TX"}


def normalise(value: str | None) -> tuple[int | str, ...] | None:
    """Compare values split on whitespace, as ints where possible (sysctl -n prints tabs)."""
    if value is None:
        return None
    out: list[int | str] = []
    for tok in str(value).split():
        try:
            out.append(int(tok))
        except ValueError:
            out.append(tok.lower())
    return tuple(out)


def same(a: str | None, b: str | None) -> bool:
    return normalise(a) == normalise(b)


def iface_problem(name: str) -> str | None:
    """Why ``name`` cannot be a Linux interface name (the kernel's ``dev_valid_name``: 1-15
    bytes, not ``.`` or ``..``, no ``/``, ``:`` or whitespace; nor a control character), or
    None. ``ip link show dev ''`` answers for the FIRST interface: an empty name would read
    and set another device's settings."""
    if not name:
        return "empty"
    if len(name.encode(errors="surrogateescape")) > 15:
        return "longer than 15 bytes"
    if name in (".", ".."):
        return "'.' and '..' are not names"
    if any(c in "/:" or c.isspace() or not c.isprintable() for c in name):
        return "it has '/', ':', a space or a control character"
    return None


def nic_key(iface: str, param: str) -> str:
    """The resolved key of ``param`` on ``iface``; UsageError if ``iface`` is no interface
    name (before anything reads or writes it)."""
    why = iface_problem(iface)
    if why:
        raise UsageError(f"--iface {iface!r}: not an interface name ({why})")
    return f"nic[{iface}].{param}"


def split_nic_key(key: str) -> tuple[str, str] | None:
    m = _NIC_KEY_RE.fullmatch(key)
    return (m.group(1), m.group(2)) if m else None


def read_values(target: TuningTarget, keys: Sequence[str]) -> dict[str, str | None]:
    """Current values; None = no such sysctl, UNSUPPORTED = device cannot do it."""
    sysctl = [k for k in keys if split_nic_key(k) is None]
    out = dict(target.read(sysctl)) if sysctl else {}
    cache: dict[tuple[str, str], dict[str, str] | None] = {}
    for key in keys:
        parts = split_nic_key(key)
        if parts is None:
            continue
        iface, param = parts
        group = param.split(".", 1)[0] if "." in param else "link"
        if (iface, group) not in cache:
            cache[(iface, group)] = _read_group(target, iface, group)
        values = cache[(iface, group)]
        if values is None:
            out[key] = UNSUPPORTED
        else:
            out[key] = values.get(param.split(".", 1)[-1] if group != "link" else param,
                                  UNSUPPORTED)
    return {k: out.get(k) for k in keys}


def write_values(target: TuningTarget, values: Mapping[str, str]) -> None:
    """Write in order: consecutive sysctl keys in one target.write, NIC keys one by one."""
    done: list[str] = []
    batch: dict[str, str] = {}

    def flush() -> None:
        if batch:
            try:
                target.write(dict(batch))
            except WriteFailed as exc:
                raise WriteFailed(exc.key, exc.reason, done + list(exc.written)) from None
            done.extend(batch)
            batch.clear()

    for key, value in values.items():
        parts = split_nic_key(key)
        if parts is None:
            batch[key] = value
            continue
        flush()
        res = target.run(_set_argv(*parts, value))
        if not res.ok:
            raise WriteFailed(key, res.first_error_line(), done)
        done.append(key)
    flush()


def _set_argv(iface: str, param: str, value: str) -> list[str]:
    if param in ("mtu", "txqueuelen"):
        return ["ip", "link", "set", "dev", iface, param, value]
    group, name = param.split(".", 1)
    flag = {"ring": "-G", "pause": "-A", "coalesce": "-C"}[group]
    return ["ethtool", flag, iface, name, value]


def _read_group(target: TuningTarget, iface: str, group: str) -> dict[str, str] | None:
    if group == "link":
        res = target.run(["ip", "-j", "link", "show", "dev", iface])
        if not res.ok:
            raise UsageError(f"{target.label}: no interface {iface!r}: {res.first_error_line()}")
        info = (json.loads(res.stdout or "[]") or [{}])[0]
        return {"mtu": str(info.get("mtu", "")), "txqueuelen": str(info.get("txqlen", ""))}
    flag = {"ring": "-g", "pause": "-a", "coalesce": "-c"}[group]
    res = target.run(["ethtool", flag, iface])
    if not res.ok:
        return None     # "Operation not supported" and friends: the device cannot do it
    return parse_ethtool(group, res.stdout)


def parse_ethtool(group: str, text: str) -> dict[str, str]:
    """Current values from ``ethtool -g`` / ``-a`` / ``-c`` text output."""
    if group == "ring":
        text = text.split("Current hardware settings:", 1)[-1]
        labels = {v: k for k, v in _RING_LABELS.items()}
    elif group == "pause":
        labels = {v: k for k, v in _PAUSE_LABELS.items()}
    else:
        labels = {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        if group == "coalesce" and line.startswith("Adaptive"):
            for name, val in re.findall(r"(RX|TX):\s*(\w+)", line):
                out[f"adaptive-{name.lower()}"] = val.lower()
            continue
        name, sep, val = line.partition(":")
        if not sep:
            continue
        name, val = name.strip(), val.strip()
        if group == "coalesce":
            if re.fullmatch(r"[a-z\-]+", name) and val not in ("", "n/a"):
                out[name] = val
        elif name in labels and val not in ("", "n/a"):
            out[labels[name]] = val.lower()
    return out
