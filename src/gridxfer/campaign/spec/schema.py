"""Campaign files: YAML in, frozen dataclasses out, every error names ``file:line`` and
the field.

```yaml
campaign: sc-t0-t1
source: {url: "root://t0.example:1094//store/raw/", files: {glob: "*.root"}}
destinations:
  - tier: T1-CNAF
    pool: ["gsiftp://se01.cnaf.example/data/", "gsiftp://se02.cnaf.example/data/"]
    streams: 4          # TCP streams per transfer
    max_active: 6       # concurrent transfers on this link
checksum: {algorithm: adler32, verify: both}
retries: {max: 3, backoff: 30s}
circuit_breaker: {cooldown: 15s, max_cooldown: 5m}   # an endpoint's time out after failures
on_pool_down: fail      # or {wait: 30m}: a tier whose whole pool is down (pooldown.py)
```

``source.files`` is one of: a list (``["a.root", {name: b.root, size: 3MB, adler32: ...}]``),
``{glob: "*.root"}`` (one directory), ``{recursive: true}`` (optionally with ``glob``),
or ``{from: list.txt}`` (lines ``name size [adler32]``, relative to the campaign file).
URLs in ``source.url`` and ``pool`` may instead be testbed inventory endpoint names
(``t1a-xrd1``, optionally followed by a sub-path: ``t1a-xrd1/data/``).
"""
from __future__ import annotations

import difflib
import os
from dataclasses import replace
from pathlib import Path
from typing import Any
from collections.abc import Callable

import yaml
from yaml.nodes import Node, ScalarNode, SequenceNode

from gridxfer.errors import SpecError
from gridxfer.inputs import parse_yaml, read_text
from gridxfer import limits, units
from gridxfer.redact import WHERE_CREDENTIALS_GO, credential_in_url, redact
from gridxfer.campaign.journal.store import _NAME_RE
from gridxfer.campaign.spec.model import (  # noqa: F401  (re-exported: callers import them from here)
    ALGORITHMS, SCHEMES, VERIFY_MODES, _HEX8, CampaignSpec, ChecksumSpec, CircuitSpec, FileItem,
    RetrySpec,
    SourceSpec, TierSpec, spec_from_dict, spec_to_dict)
from gridxfer.campaign.spec.nodes import Checker as _Checker, _kind


# ---------------------------------------------------------------- the schema
_TOP = ("campaign", "source", "destinations", "checksum", "retries", "timeout", "overwrite",
        "third_party", "circuit_breaker", "on_pool_down")
MIN_COOLDOWN = 1.0                          # s: circuit_breaker.*, on_pool_down.wait
POOL_DOWN_WAIT_DEFAULT = 3600.0             # on_pool_down: wait
_TIER = ("tier", "pool", "streams", "max_active", "min_active", "tcp_buffer", "selector")


def load_spec(path: str | os.PathLike, *,
              resolver: Callable[[str], str] | None = None) -> CampaignSpec:
    """Read and validate a campaign file. Raises SpecError (exit 2) naming file:line."""
    shown = str(path)
    text = read_text(path, shown)
    docs = parse_yaml(lambda t: list(yaml.compose_all(t, Loader=yaml.SafeLoader)), text, shown)
    docs = [d for d in docs if d is not None]
    if len(docs) != 1:
        raise SpecError("expected exactly one YAML document" if docs else "the file is empty",
                        path=shown, line=docs[1].start_mark.line + 1 if len(docs) > 1 else None)
    return _campaign(_Checker(shown, resolver), docs[0], Path(path).resolve().parent)


def _campaign(c: _Checker, root: Node, base_dir: Path) -> CampaignSpec:
    top = c.mapping(root, "", _TOP, required=("campaign", "source", "destinations"))
    name = c.string(top["campaign"], "campaign")
    if not _NAME_RE.fullmatch(name):
        raise c.fail(top["campaign"], "campaign",
                     f"bad name {name!r}: use letters, digits, '.', '_' and '-' (max 128)")
    source = _source(c, top["source"], base_dir)
    dests = _destinations(c, top["destinations"])
    checksum = ChecksumSpec()
    if "checksum" in top:
        checksum = _checksum(c, top["checksum"])
    retries = RetrySpec()
    if "retries" in top:
        m = c.mapping(top["retries"], "retries", ("max", "backoff"))
        retries = RetrySpec(
            max=c.integer(m["max"], "retries.max", minimum=0, limit=limits.MAX_RETRIES)
            if "max" in m else 3,
            backoff=c.parsed(m["backoff"], "retries.backoff", units.parse_duration,
                             limit=limits.MAX_DURATION) if "backoff" in m else 30.0)
        _last_wait(c, top["retries"], retries)
    timeout = 3600.0
    if "timeout" in top:
        timeout = c.parsed(top["timeout"], "timeout", units.parse_duration, positive=True,
                           limit=limits.MAX_DURATION)
    overwrite = c.boolean(top["overwrite"], "overwrite") if "overwrite" in top else False
    tpc = c.boolean(top["third_party"], "third_party") if "third_party" in top else False
    if tpc and source.url.startswith("file:"):
        raise c.fail(top["third_party"], "third_party", "third-party copy needs a remote source")
    circuit = _circuit(c, top["circuit_breaker"]) if "circuit_breaker" in top else CircuitSpec()
    wait = _on_pool_down(c, top["on_pool_down"]) if "on_pool_down" in top else 0.0
    return CampaignSpec(name=name, source=source, destinations=dests, checksum=checksum,
                        retries=retries, timeout=timeout, overwrite=overwrite, third_party=tpc,
                        circuit_breaker=circuit, pool_down_wait=wait,
                        path=c.path, inventory=c.used_inventory)


def _last_wait(c: _Checker, node: Node, r: RetrySpec) -> None:
    """The backoff doubles after each attempt: the last wait must stay bounded too."""
    wait = r.backoff * 2.0 ** (r.max - 1) if r.max else 0.0
    msg = limits.MAX_RETRY_WAIT.above(wait, units.fmt_duration(wait))
    if msg:
        raise c.fail(node, "retries", f"backoff {r.backoff:g}s doubled {r.max - 1} times waits "
                                      f"{msg}; lower max or backoff")


def _seconds(c: _Checker, node: Node, where: str, limit: limits.Limit) -> float:
    val = c.parsed(node, where, units.parse_duration, limit=limit)
    if val < MIN_COOLDOWN:
        raise c.fail(node, where,
                     f"must be at least {MIN_COOLDOWN:g}s, got {c.value(node, where)!r}")
    return val


def _circuit(c: _Checker, node: Node) -> CircuitSpec:
    m = c.mapping(node, "circuit_breaker", ("cooldown", "max_cooldown"))
    cooldown = (_seconds(c, m["cooldown"], "circuit_breaker.cooldown", limits.MAX_COOLDOWN)
                if "cooldown" in m else CircuitSpec.cooldown)
    if "max_cooldown" not in m:
        return CircuitSpec(cooldown, max(cooldown, CircuitSpec.max_cooldown))
    top = _seconds(c, m["max_cooldown"], "circuit_breaker.max_cooldown", limits.MAX_MAX_COOLDOWN)
    if top < cooldown:
        raise c.fail(m["max_cooldown"], "circuit_breaker.max_cooldown",
                     f"{units.fmt_duration(top)} is below cooldown {units.fmt_duration(cooldown)}")
    return CircuitSpec(cooldown, top)


def _on_pool_down(c: _Checker, node: Node) -> float:
    """Seconds to wait for a tier whose whole pool is down; 0.0 = fail its files."""
    if isinstance(node, ScalarNode):
        action = c.string(node, "on_pool_down")
        if action in ("fail", "wait"):
            return 0.0 if action == "fail" else POOL_DOWN_WAIT_DEFAULT
        raise c.fail(node, "on_pool_down", f"must be fail, wait or {{wait: <duration>}}, "
                                           f"got {action!r}")
    m = c.mapping(node, "on_pool_down", ("wait",), required=("wait",))
    return _seconds(c, m["wait"], "on_pool_down.wait", limits.MAX_DURATION)


def _checksum(c: _Checker, node: Node) -> ChecksumSpec:
    if isinstance(node, ScalarNode) and c.value(node, "checksum") in (False, None, "none"):
        return ChecksumSpec(algorithm=None, verify="none")
    m = c.mapping(node, "checksum", ("algorithm", "verify"))
    algo = "adler32"
    if "algorithm" in m:
        algo = c.string(m["algorithm"], "checksum.algorithm").lower()
        if algo not in ALGORITHMS:
            raise c.fail(m["algorithm"], "checksum.algorithm",
                         f"unsupported algorithm {algo!r} (use {', '.join(ALGORITHMS)})")
    verify = "both"
    if "verify" in m:
        verify = c.string(m["verify"], "checksum.verify").lower()
        if verify not in VERIFY_MODES:
            hint = difflib.get_close_matches(verify, VERIFY_MODES, n=1)
            raise c.fail(m["verify"], "checksum.verify",
                         f"must be one of {', '.join(VERIFY_MODES)}"
                         + (f" (did you mean {hint[0]!r}?)" if hint else ""))
    return ChecksumSpec(algorithm=algo, verify=verify)


def _source(c: _Checker, node: Node, base_dir: Path) -> SourceSpec:
    m = c.mapping(node, "source", ("url", "files"), required=("url", "files"))
    url = c.url(m["url"], "source.url")
    fnode = m["files"]
    if isinstance(fnode, SequenceNode):
        return SourceSpec(url=url, files=_file_list(c, fnode))
    f = c.mapping(fnode, "source.files", ("glob", "recursive", "list", "from"))
    kinds = [k for k in ("list", "from") if k in f]
    if len(kinds) > 1 or (kinds and ("glob" in f or "recursive" in f)):
        raise c.fail(fnode, "source.files", "use one of: list, from, glob/recursive")
    if not f:
        raise c.fail(fnode, "source.files", "empty: give list, from, glob or recursive")
    if "list" in f:
        if not isinstance(f["list"], SequenceNode):
            raise c.fail(f["list"], "source.files.list", f"expected a list, got {_kind(f['list'])}")
        return SourceSpec(url=url, files=_file_list(c, f["list"]))
    if "from" in f:
        listed = Path(c.string(f["from"], "source.files.from"))
        listed = listed if listed.is_absolute() else base_dir / listed
        if not listed.is_file():
            raise c.fail(f["from"], "source.files.from", f"no such list file: {listed}")
        return SourceSpec(url=url, list_file=str(listed))
    pattern = c.string(f["glob"], "source.files.glob") if "glob" in f else None
    recursive = c.boolean(f["recursive"], "source.files.recursive") if "recursive" in f else False
    if pattern is not None and "/" in pattern:
        raise c.fail(f["glob"], "source.files.glob", "a glob matches names, not paths (no '/')")
    if pattern is None and not recursive:
        raise c.fail(fnode, "source.files", "recursive: false needs a glob")
    return SourceSpec(url=url, glob=pattern, recursive=recursive)


def _file_list(c: _Checker, node: SequenceNode) -> tuple[FileItem, ...]:
    if not node.value:
        raise c.fail(node, "source.files", "the file list is empty")
    items: list[FileItem] = []
    seen: set[str] = set()
    for i, item in enumerate(node.value):
        where = f"source.files[{i}]"
        if isinstance(item, ScalarNode):
            fi = FileItem(name=_rel_name(c, item, where, c.string(item, where)))
        else:
            m = c.mapping(item, where, ("name", "size", "adler32"), required=("name",))
            fi = FileItem(
                name=_rel_name(c, m["name"], f"{where}.name", c.string(m["name"], f"{where}.name")),
                size=c.parsed(m["size"], f"{where}.size", units.parse_size,
                              limit=limits.MAX_FILE_SIZE) if "size" in m else None,
                adler32=_adler(c, m["adler32"], f"{where}.adler32") if "adler32" in m else None)
        if fi.name in seen:
            raise c.fail(item, where, f"duplicate file {fi.name!r}")
        seen.add(fi.name)
        items.append(fi)
    return tuple(items)


def _rel_name(c: _Checker, node: Node, where: str, name: str) -> str:
    if name.startswith("/") or "://" in name or ".." in name.split("/") or name.endswith("/"):
        raise c.fail(node, where, f"{redact(name)!r} must be a file name relative to source.url")
    what = credential_in_url(name)
    if what:
        raise c.fail(node, where, f"the name carries {what}: {WHERE_CREDENTIALS_GO}")
    return name


def _adler(c: _Checker, node: Node, where: str) -> str:
    raw = c.value(node, where)
    text = f"{raw:08x}" if isinstance(raw, int) and not isinstance(raw, bool) else str(raw)
    if not _HEX8.fullmatch(text):
        raise c.fail(node, where, f"not an adler32 (8 hex digits): {raw!r}")
    return text.lower().zfill(8)


def _destinations(c: _Checker, node: Node) -> tuple[TierSpec, ...]:
    if not isinstance(node, SequenceNode):
        raise c.fail(node, "destinations", f"expected a list of tiers, got {_kind(node)}")
    if not node.value:
        raise c.fail(node, "destinations", "at least one destination tier is needed")
    tiers: list[TierSpec] = []
    for i, tnode in enumerate(node.value):
        where = f"destinations[{i}]"
        m = c.mapping(tnode, where, _TIER, required=("tier", "pool"))
        name = c.string(m["tier"], f"{where}.tier")
        if not _NAME_RE.fullmatch(name):
            raise c.fail(m["tier"], f"{where}.tier", f"bad tier name {name!r}")
        if any(t.name == name for t in tiers):
            raise c.fail(m["tier"], f"{where}.tier", f"duplicate tier {name!r}")
        pnode = m["pool"]
        if isinstance(pnode, ScalarNode):
            pool_nodes = [pnode]
        elif isinstance(pnode, SequenceNode):
            pool_nodes = list(pnode.value)
        else:
            raise c.fail(pnode, f"{where}.pool", f"expected a list of URLs, got {_kind(pnode)}")
        if not pool_nodes:
            raise c.fail(pnode, f"{where}.pool", "the pool is empty")
        pool: list[str] = []
        for j, p in enumerate(pool_nodes):
            u = c.url(p, f"{where}.pool[{j}]")
            if u in pool:
                raise c.fail(p, f"{where}.pool[{j}]", f"duplicate endpoint {u!r}")
            pool.append(u)
        kw: dict[str, Any] = {}
        for key, bound in (("streams", limits.MAX_STREAMS), ("max_active", limits.MAX_ACTIVE),
                           ("min_active", limits.MAX_ACTIVE)):
            if key in m:
                kw[key] = c.integer(m[key], f"{where}.{key}", minimum=1, limit=bound)
        if "tcp_buffer" in m:
            kw["tcp_buffer"] = c.parsed(m["tcp_buffer"], f"{where}.tcp_buffer", units.parse_size,
                                        positive=True, limit=limits.MAX_TCP_BUFFER)
        if "selector" in m:
            kw["selector"] = _selector(c, m["selector"], f"{where}.selector")
        tier = TierSpec(name=name, pool=tuple(pool), **kw)
        if "max_active" in kw and "min_active" not in kw:
            tier = replace(tier, min_active=min(tier.min_active, tier.max_active))
        if tier.min_active > tier.max_active:
            raise c.fail(m.get("min_active", tnode), f"{where}.min_active",
                         f"min_active {tier.min_active} is above max_active {tier.max_active}")
        tiers.append(tier)
    total = sum(t.max_active for t in tiers)
    msg = limits.MAX_ACTIVE_TOTAL.above(total, f"the tiers' max_active add up to {total}, which")
    if msg:
        raise c.fail(node, "destinations", msg)
    return tuple(tiers)


def _selector(c: _Checker, node: Node, where: str) -> str:
    name = c.string(node, where)
    from gridxfer.campaign.policy.selection import SELECTORS
    if name not in SELECTORS:
        hint = difflib.get_close_matches(name, list(SELECTORS), n=1)
        raise c.fail(node, where, f"unknown selector {name!r}"
                     + (f" (did you mean {hint[0]!r}?)" if hint
                        else f" (choose from {', '.join(sorted(SELECTORS))})"))
    return name
