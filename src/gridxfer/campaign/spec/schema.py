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

import os
from dataclasses import replace
from functools import partial
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
from gridxfer.campaign.spec import aliases, engine as engine_mod, options, tape, tiers
from gridxfer.campaign.spec.tokens import token_spec
from gridxfer.campaign.spec.options import MIN_COOLDOWN, POOL_DOWN_WAIT_DEFAULT  # noqa: F401


# ---------------------------------------------------------------- the schema
_TOP = ("campaign", "source", "destinations", "checksum", "retries", "timeout", "overwrite",
        "third_party", "circuit_breaker", "on_pool_down", "engine", "fts3", *aliases.TOP)
_REQUIRED = ("campaign", "source", "destinations")


def load_spec(path: str | os.PathLike, *,
              resolver: Callable[[str], str] | None = None) -> CampaignSpec:
    """Read and validate a campaign file. Raises SpecError (exit 2) naming file:line; a file
    with several errors raises them all at once (``SpecErrors``)."""
    shown = str(path)
    text = read_text(path, shown)
    docs = parse_yaml(lambda t: list(yaml.compose_all(t, Loader=yaml.SafeLoader)), text, shown)
    docs = [d for d in docs if d is not None]
    if len(docs) != 1:
        raise SpecError("expected exactly one YAML document" if docs else "the file is empty",
                        path=shown, line=docs[1].start_mark.line + 1 if len(docs) > 1 else None)
    c = _Checker(shown, resolver)
    spec = c.check(lambda: _campaign(c, docs[0], Path(path).resolve().parent), None)
    c.done()
    assert spec is not None
    return spec


def _campaign(c: _Checker, root: Node, base_dir: Path) -> CampaignSpec | None:
    top = c.keys(root, "", _TOP, required=_REQUIRED)

    def get(key: str, read: Callable[[Node], Any], default: Any) -> Any:
        return c.check(lambda: read(top[key]), default) if key in top else default

    name = get("campaign", lambda n: _name(c, n), None)
    source = get("source", lambda n: _source(c, n, base_dir), None)
    staging = tape.key_node(top["source"], "bring_online") if "source" in top else None
    if source is not None and staging is not None:
        source = c.check(lambda: replace(source, bring_online=tape.bring_online(
            c, staging, "source.bring_online")), None)
    streams = get("nostreams", lambda n: c.integer(n, "nostreams", limit=limits.MAX_STREAMS), 1)
    dests = get("destinations", lambda n: tiers.destinations(c, n, base_dir, streams), ())
    checksum = get("checksum", lambda n: options.checksum(c, n), ChecksumSpec())
    if "verify_checksum" in top:
        checksum = c.check(lambda: aliases.verify_checksum(c, top, checksum), checksum)
    retries = get("retries", lambda n: options.retries(c, n), RetrySpec())
    if "retry" in top or "retry_delay" in top:
        retries = c.check(lambda: aliases.retry(c, top, retries), retries)
    fts3: dict[str, Any] = {
        "priority": get("priority", lambda n: aliases.priority(c, n, "priority"), 3),
        "activity": get("activity", lambda n: aliases.activity(c, n, "activity"), "default"),
        "activity_shares": get("activity_shares", lambda n: aliases.activity_shares(c, n), ()),
        "job_metadata": get("job_metadata", lambda n: aliases.job_metadata(c, n), None)}
    timeout = get("timeout", lambda n: c.parsed(n, "timeout", units.parse_duration,
                                                positive=True, limit=limits.MAX_DURATION), 3600.0)
    overwrite = get("overwrite", lambda n: c.boolean(n, "overwrite"), False)
    tpc = get("third_party", lambda n: c.boolean(n, "third_party"), False)
    if tpc and source is not None and source.url.startswith("file:"):
        c.record(c.fail(top["third_party"], "third_party",
                        "third-party copy needs a remote source"))
    circuit = get("circuit_breaker", lambda n: options.circuit(c, n), CircuitSpec())
    wait = get("on_pool_down", lambda n: options.on_pool_down(c, n), 0.0)
    engine = c.check(lambda: engine_mod.engine_spec(c, top, base_dir), engine_mod.EngineSpec())
    if engine.kind == "fts3" and name is not None and source is not None:
        fts3_refusals(c, top, name, source, dests, fts3["job_metadata"])
        for where, why in engine_mod.auth_conflicts(engine, source, dests):
            c.record(c.fail(top["fts3"], where, why))
    if c.errors or name is None or source is None or not dests:
        return None
    return CampaignSpec(name=name, source=source, destinations=dests, checksum=checksum,
                        retries=retries, timeout=timeout, overwrite=overwrite, third_party=tpc,
                        circuit_breaker=circuit, pool_down_wait=wait,
                        path=c.path, inventory=c.used_inventory, **fts3, engine=engine,
                        names=tuple(sorted(c.names.items())))


def fts3_refusals(c: _Checker, top: dict[str, Node], name: str, source: SourceSpec,
                  dests: tuple[TierSpec, ...], metadata: str | None) -> None:
    """What an FTS3 server would refuse at submission, refused here (engine: fts3)."""
    urls = [(source.url, top["source"], "source.url")]
    urls += [(u, top["destinations"], f"destinations.{t.name}.pool") for t in dests for u in t.pool]
    engine_mod.local_urls(urls, c)
    engine_mod.metadata_size(c, top.get("job_metadata", top.get("campaign")), name, metadata)


def _name(c: _Checker, node: Node) -> str:
    name = c.string(node, "campaign")
    if not _NAME_RE.fullmatch(name):
        raise c.fail(node, "campaign",
                     f"bad name {name!r}: use letters, digits, '.', '_' and '-' (max 128)")
    return name


def _source(c: _Checker, node: Node, base_dir: Path) -> SourceSpec:
    m = c.mapping(node, "source", ("url", "files", "bring_online", "token"),
                  required=("url", "files"))
    url = c.check(lambda: c.url(m["url"], "source.url"), "")
    if "token" in m:
        tok = c.check(lambda: token_spec(c, m["token"], "source.token", base_dir), None)
        return replace(_source_files(c, m, url, base_dir), token=tok)
    return _source_files(c, m, url, base_dir)


def _source_files(c: _Checker, m: dict[str, Node], url: str, base_dir: Path) -> SourceSpec:
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
        fi = c.check(partial(_file_item, c, item, f"source.files[{i}]"), None)
        if fi is None:
            continue
        if fi.name in seen:
            c.record(c.fail(item, f"source.files[{i}]", f"duplicate file {fi.name!r}"))
        seen.add(fi.name)
        items.append(fi)
    return tuple(items)


def _file_item(c: _Checker, item: Node, where: str) -> FileItem:
    if isinstance(item, ScalarNode):
        return FileItem(name=_rel_name(c, item, where, c.string(item, where)))
    m = c.mapping(item, where, ("name", "size", "adler32", "priority", "activity"),
                  required=("name",))
    name = _rel_name(c, m["name"], f"{where}.name", c.string(m["name"], f"{where}.name"))
    prio = c.check(lambda: aliases.priority(c, m["priority"], f"{where}.priority"), None) \
        if "priority" in m else None
    act = c.check(lambda: aliases.activity(c, m["activity"], f"{where}.activity"), None) \
        if "activity" in m else None
    size = c.check(lambda: c.parsed(m["size"], f"{where}.size", units.parse_size,
                                    limit=limits.MAX_FILE_SIZE), None) if "size" in m else None
    adler = c.check(lambda: _adler(c, m["adler32"], f"{where}.adler32"), None) \
        if "adler32" in m else None
    return FileItem(name=name, size=size, adler32=adler, priority=prio, activity=act)


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
