"""Validation plumbing for campaign files: typed reads of YAML nodes whose errors name
``file:line`` and the field (``SpecError``), URL checks and testbed endpoint names.

Every error of a file is reported in one run: a field's reader raises ``SpecError``,
``Checker.check`` records it and goes on with the next field, and ``Checker.done`` raises
them all at once (``SpecErrors``, sorted by line). Unknown and duplicate keys are recorded
without stopping the mapping they are in."""
from __future__ import annotations

import difflib
import re
from typing import Any, TypeVar
from collections.abc import Callable
from urllib.parse import urlsplit

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from gridxfer.errors import GridxferError, SpecError, SpecErrors, UsageError
from gridxfer.limits import Limit
from gridxfer.redact import WHERE_CREDENTIALS_GO, credential_in_url, redact
from gridxfer.campaign.journal.names import NAME_RE
from gridxfer.campaign.spec.model import SCHEMES

T = TypeVar("T")


class Checker:
    def __init__(self, path: str, resolver: Callable[[str], str] | None) -> None:
        self.path, self._resolver, self.used_inventory = path, resolver, False
        self.names: dict[str, str] = {}     # URL -> the inventory name the file gave for it
        self._con = SafeConstructor()
        self.errors: list[SpecError] = []

    def check(self, read: Callable[[], T], default: T) -> T:
        """``read()``, or ``default`` with its error recorded: the next field is read too."""
        try:
            return read()
        except SpecError as exc:
            self.record(exc)
            return default

    def record(self, exc: SpecError) -> None:
        if not any(e is exc or str(e) == str(exc) for e in self.errors):
            self.errors.append(exc)

    def done(self) -> None:
        """Raise every recorded error at once (one, as itself)."""
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            raise SpecErrors(sorted(self.errors, key=lambda e: e.line or 0))

    def fail(self, node: Node | None, fieldname: str | None, msg: str) -> SpecError:
        line = node.start_mark.line + 1 if node is not None else None
        return SpecError(msg, path=self.path, line=line, field=fieldname)

    def mapping(self, node: Node, fieldname: str, allowed: tuple[str, ...],
                required: tuple[str, ...] = ()) -> dict[str, Node]:
        """The mapping's keys; a missing required key raises (after all are recorded)."""
        out = self.keys(node, fieldname, allowed, required)
        for key in required:
            if key not in out:
                raise self.fail(node, f"{fieldname}.{key}" if fieldname else key,
                                "required key is missing")      # recorded by ``keys``
        return out

    def keys(self, node: Node, fieldname: str, allowed: tuple[str, ...],
             required: tuple[str, ...] = ()) -> dict[str, Node]:
        """The mapping's keys; unknown, duplicate and missing keys are recorded, not raised
        (the caller reads the others)."""
        if not isinstance(node, MappingNode):
            raise self.fail(node, fieldname, f"expected a mapping, got {_kind(node)}")
        out: dict[str, Node] = {}
        for knode, vnode in node.value:
            key = knode.value if isinstance(knode, ScalarNode) else None
            sub = f"{fieldname}.{key}" if fieldname else str(key)
            if not isinstance(key, str) or key not in allowed:
                hint = difflib.get_close_matches(str(key), allowed, n=1)
                more = (
                    f" (did you mean {hint[0]!r}?)" if hint else f" (allowed: {', '.join(allowed)})"
                )
                self.record(self.fail(knode, sub, f"unknown key{more}"))
            elif key in out:
                self.record(self.fail(knode, sub, "duplicate key"))
            else:
                out[key] = vnode
        for key in required:
            if key not in out:
                self.record(self.fail(node, f"{fieldname}.{key}" if fieldname else key,
                                      "required key is missing"))
        return out

    def value(self, node: Node, fieldname: str) -> Any:
        if not isinstance(node, ScalarNode):
            raise self.fail(node, fieldname, f"expected a single value, got {_kind(node)}")
        try:
            return self._con.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:   # !!float x
            raise self.fail(node, fieldname, f"bad value: {_one_line(exc)}") from None

    def construct(self, node: Node) -> Any:
        """Any node as plain Python (mappings, lists, values); YAML errors raise ValueError."""
        try:
            return self._con.construct_object(node, deep=True)
        except (yaml.YAMLError, OverflowError) as exc:
            raise ValueError(_one_line(exc)) from None

    def string(self, node: Node, fieldname: str) -> str:
        val = self.value(node, fieldname)
        if not isinstance(val, str) or not val.strip():
            raise self.fail(node, fieldname, f"expected a non-empty string, got {val!r}")
        return val.strip()

    def boolean(self, node: Node, fieldname: str) -> bool:
        val = self.value(node, fieldname)
        if not isinstance(val, bool):
            raise self.fail(node, fieldname, f"expected true or false, got {val!r}")
        return val

    def integer(self, node: Node, fieldname: str, minimum: int = 1,
                limit: Limit | None = None) -> int:
        val = self.value(node, fieldname)
        if isinstance(val, bool) or not isinstance(val, int):
            raise self.fail(node, fieldname, f"expected a whole number, got {val!r}")
        if val < minimum:
            raise self.fail(node, fieldname, f"must be at least {minimum}, got {val}")
        self._bounded(node, fieldname, val, val, limit)
        return val

    def parsed(self, node: Node, fieldname: str, parser: Callable[[Any], Any],
               positive: bool = False, limit: Limit | None = None) -> Any:
        raw = self.value(node, fieldname)
        try:
            val = parser(raw)
        except UsageError as exc:
            raise self.fail(node, fieldname, str(exc)) from None
        except (OverflowError, ValueError):         # '1e999': not a number we can use
            raise self.fail(node, fieldname, "not a usable number") from None
        if positive and val <= 0:
            raise self.fail(node, fieldname, f"must be greater than zero, got {raw!r}")
        self._bounded(node, fieldname, val, raw, limit)
        return val

    def _bounded(self, node: Node, fieldname: str, val: float, raw: Any,
                 limit: Limit | None) -> None:
        msg = limit.above(val, raw) if limit is not None else None
        if msg:
            raise self.fail(node, fieldname, msg)

    def url(self, node: Node, fieldname: str, directory: bool = True) -> str:
        text = self.string(node, fieldname)
        named = None
        if "://" not in text:
            named, text = text.strip("/"), self._endpoint_name(node, fieldname, text)
        what = credential_in_url(text)
        if what:
            raise self.fail(node, fieldname, f"the URL {redact(text)!r} carries {what}: "
                                             f"{WHERE_CREDENTIALS_GO}")
        try:
            parts = urlsplit(text)
            _ = parts.hostname              # a malformed [IPv6] host raises here or above
        except ValueError:
            raise self.fail(node, fieldname, f"URL {text!r} has a bad host") from None
        scheme = parts.scheme.lower()
        if scheme not in SCHEMES:
            raise self.fail(node, fieldname,
                            f"unsupported URL scheme {parts.scheme!r} in {text!r} "
                            f"(use one of {', '.join(sorted(SCHEMES))})")
        if scheme != "file" and not parts.hostname:
            raise self.fail(node, fieldname, f"URL {text!r} has no host")
        try:
            _ = parts.port                  # raises ValueError for a bad port
        except ValueError:
            raise self.fail(node, fieldname, f"URL {text!r} has a bad port") from None
        if not parts.path or not parts.path.startswith("/"):
            raise self.fail(node, fieldname, f"URL {text!r} has no absolute path")
        if parts.query or parts.fragment or any(c.isspace() for c in text):
            raise self.fail(node, fieldname, f"URL {text!r} must not contain spaces, '?' or '#'")
        url = text if not directory or text.endswith("/") else text + "/"
        if named:
            self.names[url] = named
        return url

    def given_name(self, node: Node, url: str, where: str) -> None:
        """A pool entry's ``name:`` (``{url: ..., name: cnaf-se01}``), the name every view
        shows for ``url`` (``journal/names.py``); its keys are checked by the caller."""
        if not isinstance(node, MappingNode):
            return
        vnode = next((v for k, v in node.value
                      if isinstance(k, ScalarNode) and k.value == "name"), None)
        if vnode is None:
            return
        name = self.string(vnode, f"{where}.name")
        if not NAME_RE.fullmatch(name):
            raise self.fail(vnode, f"{where}.name", f"bad endpoint name {name!r}: use letters, "
                                                    "digits, '.', '_' and '-' (max 48)")
        other = next((u for u, n in self.names.items() if n == name and u != url), None)
        if other is not None:
            raise self.fail(vnode, f"{where}.name", f"{name!r} already names {redact(other)}")
        self.names[url] = name

    def _endpoint_name(self, node: Node, fieldname: str, text: str) -> str:
        name, _, sub = text.partition("/")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
            raise self.fail(node, fieldname, f"not a URL or endpoint name: {text!r}")
        try:
            if self._resolver is None:
                self._resolver = _inventory_resolver()
            base = self._resolver(name)
        except (GridxferError, KeyError, LookupError, OSError) as exc:
            raise self.fail(node, fieldname, f"endpoint name {name!r}: {_one_line(exc)}") from None
        self.used_inventory = True
        return base.rstrip("/") + "/" + sub if sub else base


def _kind(node: Node) -> str:
    return {MappingNode: "a mapping", SequenceNode: "a list", ScalarNode: "a value"}.get(
        type(node), type(node).__name__)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _inventory_resolver() -> Callable[[str], str]:
    from gridxfer.testbed.inventory import load_inventory
    inv = load_inventory()
    return lambda name: str(inv.resolve(name))
