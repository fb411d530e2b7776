"""The topology file's YAML (``topology``): a SafeLoader whose mappings remember the line
of each key, so that every error names ``file:line`` and the field (``Ctx``)."""
from __future__ import annotations

from typing import Any

import yaml

from gridxfer.errors import SpecError


class Loader(yaml.SafeLoader):
    """SafeLoader whose mappings remember the line of each key (1-based)."""


class LDict(dict):
    line = 0
    key_lines: dict[str, int]


def _construct_mapping(loader: Loader, node: yaml.MappingNode) -> LDict:
    out = LDict()
    out.line = node.start_mark.line + 1
    out.key_lines = {}
    for knode, vnode in node.value:
        key = loader.construct_object(knode, deep=True)
        out[key] = loader.construct_object(vnode, deep=True)
        out.key_lines[str(key)] = knode.start_mark.line + 1
    return out


Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


class Ctx:
    def __init__(self, path: str) -> None:
        self.path = path

    def err(self, msg: str, obj: Any = None, field: str | None = None) -> SpecError:
        line = None
        if isinstance(obj, LDict):
            line = obj.key_lines.get(field.rsplit(".", 1)[-1], obj.line) if field else obj.line
        return SpecError(msg, path=self.path, line=line, field=field)

    def mapping(self, obj: Any, keys: set[str], where: str, parent: Any = None) -> LDict:
        if not isinstance(obj, dict):
            raise self.err("must be a mapping", parent, where)
        for key in obj:
            if key not in keys:
                raise self.err(f"unknown key {key!r} (allowed: {', '.join(sorted(keys))})",
                               obj, f"{where}.{key}" if where else str(key))
        return obj  # type: ignore[return-value]

    def need(self, obj: LDict, key: str, where: str) -> Any:
        if key not in obj or obj[key] in (None, ""):
            raise self.err("is required", obj, f"{where}.{key}" if where else key)
        return obj[key]
