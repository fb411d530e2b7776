"""Tuning profiles: sysctl.d files (deployable as-is with ``sysctl -p``) plus NIC settings.

A profile ``NAME`` is ``NAME.conf`` in sysctl.d syntax, optionally with ``NAME.nic`` beside it
(``txqueuelen = 10000``, ``mtu = 9216``, ``ring.rx = 4096``, ``pause.rx = on``,
``coalesce.rx-usecs = 50``). Header comments carry metadata and includes, so the file stays
valid for ``sysctl -p``::

    # source: ESnet fasterdata, Linux host tuning
    # intent: data transfer node on a 10 Gb/s path up to 100 ms RTT
    # include: dtn-base
    net.core.rmem_max = 67108864
    -net.core.default_qdisc = fq      # leading '-': optional (sysctl.d: failure ignored)

Included profiles come first; a later assignment of the same key overrides an earlier one.
Profiles are searched in ``$GRIDXFER_PROFILE_PATH`` (colon-separated), then
``$GRIDXFER_HOME/profiles``, then the project's ``sysctl-profiles/``; a path to a ``.conf``
file also works.
"""
from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable

from gridxfer import state as gstate
from gridxfer.errors import SpecError, UsageError
from gridxfer.tuning.rules import check_nic, check_sysctl

BUNDLED_DIR = Path(__file__).resolve().parents[3] / "sysctl-profiles"
NIC_PREFIX = "nic."
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
_DIRECTIVE_RE = re.compile(r"#\s*(source|intent|include)\s*:\s*(.*)$", re.I)
_CONT_RE = re.compile(r"#\s{3,}(\S.*)$")


@dataclass(frozen=True)
class Setting:
    """One assignment. ``key`` is a sysctl key or ``nic.<param>`` for a NIC setting."""

    key: str
    value: str
    optional: bool = False
    path: str = ""
    line: int = 0

    @property
    def is_nic(self) -> bool:
        return self.key.startswith(NIC_PREFIX)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}" if self.path else self.key


@dataclass(frozen=True)
class Profile:
    name: str
    path: str
    source: str = ""
    intent: str = ""
    includes: tuple[str, ...] = ()
    settings: tuple[Setting, ...] = field(default=())    # flattened: includes, then own

    @property
    def sysctl(self) -> tuple[Setting, ...]:
        return tuple(s for s in self.settings if not s.is_nic)

    @property
    def nic(self) -> tuple[Setting, ...]:
        return tuple(s for s in self.settings if s.is_nic)

    def get(self, key: str) -> Setting | None:
        return next((s for s in self.settings if s.key == key), None)


def search_path() -> list[Path]:
    dirs = [Path(p) for p in os.environ.get("GRIDXFER_PROFILE_PATH", "").split(":") if p]
    if os.environ.get(gstate.HOME_ENV):
        dirs.append(gstate.root() / "profiles")
    dirs.append(BUNDLED_DIR)
    return dirs


def _is_file(path: Path) -> bool:
    """``path.is_file()``, False where it cannot be a file (a name too long: ENAMETOOLONG)."""
    try:
        return path.is_file()
    except OSError:
        return False


def find_profile(name: str) -> Path:
    """The ``.conf`` file of profile ``name`` (or ``name`` itself if it is a path)."""
    if "/" in name or name.endswith(".conf"):
        path = Path(name)
        if not _is_file(path):
            raise UsageError(f"no such profile file: {name}")
        if not _NAME_RE.fullmatch(path.stem):
            raise UsageError(f"{name}: a profile's file name must be letters, digits, '_', '.' "
                             "or '-' followed by .conf")
        return path
    if not _NAME_RE.fullmatch(name):
        raise UsageError(f"not a profile name: {name!r}")
    for d in search_path():
        candidate = d / f"{name}.conf"
        if _is_file(candidate):
            return candidate
    raise UsageError(f"unknown profile {name!r} (see `gridxfer tune list`)")


def list_profiles() -> list[Path]:
    seen: dict[str, Path] = {}
    for d in search_path():
        if d.is_dir():
            for p in sorted(d.glob("*.conf")):
                seen.setdefault(p.stem, p)
    return [seen[k] for k in sorted(seen)]


def load_profile(name: str) -> Profile:
    """Parse a profile and everything it includes. Raises SpecError naming file:line."""
    return _load(find_profile(name), ())


def _load(path: Path, stack: tuple[str, ...]) -> Profile:
    real = str(path.resolve())
    if len(stack) >= MAX_INCLUDE_DEPTH:
        raise SpecError(f"includes nested deeper than {MAX_INCLUDE_DEPTH} levels", path=str(path))
    if real in stack:
        raise SpecError("include cycle: " + " -> ".join(Path(s).stem for s in stack + (real,)),
                        path=str(path))
    meta, own, includes = _parse_conf(path)
    nic_path = path.with_suffix(".nic")
    if nic_path.is_file():
        own += _parse_nic(nic_path)
    merged: dict[str, Setting] = {}
    for inc_name, line in includes:
        try:
            inc_path = _find_include(inc_name, path.parent)
        except UsageError as exc:
            raise SpecError(str(exc), path=str(path), line=line) from None
        for s in _load(inc_path, stack + (real,)).settings:
            merged[s.key] = s
    for s in own:
        merged[s.key] = s
    return Profile(name=path.stem, path=str(path), source=meta.get("source", ""),
                   intent=meta.get("intent", ""), includes=tuple(n for n, _ in includes),
                   settings=tuple(merged.values()))


def _find_include(name: str, here: Path) -> Path:
    if not _NAME_RE.fullmatch(name):
        raise UsageError(f"include: not a profile name: {name!r}")
    local = here / f"{name}.conf"
    return local if local.is_file() else find_profile(name)


MAX_INCLUDE_DEPTH = 16
MAX_LINE = 4096       # no sysctl value is longer; the kernel reads at most a page
MAX_FILE = 1 << 20
_JINJA = ("{{", "{%", "{#")


def _read_lines(path: Path) -> list[str]:
    """The file's lines, refusing what no sysctl.d file holds: invalid UTF-8, control
    characters (NUL, escapes), absurdly long lines. Each refusal names ``file:line``."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_FILE + 1)
    except OSError as exc:
        raise SpecError(exc.strerror or str(exc), path=str(path)) from None
    if len(raw) > MAX_FILE:
        raise SpecError(f"larger than {MAX_FILE} bytes; not a profile", path=str(path))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        lineno = raw[:exc.start].count(b"\n") + 1
        raise SpecError(f"not UTF-8 text (byte 0x{raw[exc.start]:02x})", path=str(path),
                        line=lineno) from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for no, line in enumerate(lines, 1):
        line = line.removesuffix("\r")
        lines[no - 1] = line
        bad = next((c for c in line if c != "\t" and _unprintable(c)), None)
        if bad is not None:
            raise SpecError(f"control character U+{ord(bad):04X} not allowed", path=str(path),
                            line=no)
        if len(line) > MAX_LINE:
            raise SpecError(f"line longer than {MAX_LINE} characters", path=str(path), line=no)
    return lines


def _unprintable(c: str) -> bool:
    """Control, format (U+202E...), unassigned, private-use characters and line separators."""
    category = unicodedata.category(c)
    return category[0] == "C" or category in ("Zl", "Zp")


def _refuse_template(text: str, path: Path, no: int, what: str) -> None:
    """Values reach Ansible; a Jinja2 delimiter would be a template there. Refused."""
    mark = next((m for m in _JINJA if m in text), None)
    if mark is not None:
        raise SpecError(f"{what} contains {mark!r}: template syntax is not allowed in a "
                        "profile (Ansible would evaluate it)", path=str(path), line=no)


def _split_assignment(raw: str, path: Path, no: int) -> tuple[str, str, bool]:
    text = raw.strip()
    optional = text.startswith("-")
    if optional:
        text = text[1:].strip()
    if "=" not in text:
        raise SpecError(f"expected 'key = value', got {raw.strip()!r}", path=str(path), line=no)
    key, value = (t.strip() for t in text.split("=", 1))
    _refuse_template(key, path, no, "key")
    _refuse_template(value, path, no, f"{key}: value" if key else "value")
    if not key:
        raise SpecError("missing key before '='", path=str(path), line=no)
    if not value:
        raise SpecError("empty value", path=str(path), line=no, field=key)
    return key, " ".join(value.split()), optional


def _checked_assignment(raw: str, path: Path, no: int, check: Callable[[str, str], str | None],
                        seen: set[str]) -> tuple[str, str, bool]:
    """``key = value`` validated by ``check`` (a problem text or None), once per file."""
    key, value, optional = _split_assignment(raw, path, no)
    problem = check(key, value)
    if problem:
        raise SpecError(problem, path=str(path), line=no, field=key)
    if key in seen:
        raise SpecError("duplicate key in the same file", path=str(path), line=no, field=key)
    seen.add(key)
    return key, value, optional


def _parse_conf(path: Path) -> tuple[dict[str, str], list[Setting], list[tuple[str, int]]]:
    meta: dict[str, str] = {}
    settings: list[Setting] = []
    includes: list[tuple[str, int]] = []
    seen: set[str] = set()
    last_meta: str | None = None
    for no, raw in enumerate(_read_lines(path), 1):
        stripped = raw.strip()
        if not stripped:
            last_meta = None
            continue
        if stripped[0] in "#;":
            m = _DIRECTIVE_RE.match(stripped)
            if m or (last_meta and not settings):
                _refuse_template(stripped, path, no, "header")
            cont = _CONT_RE.match(raw)
            if not m and cont and last_meta and not settings:
                meta[last_meta] += " " + cont.group(1).strip()
                continue
            last_meta = m.group(1).lower() if m and m.group(1).lower() != "include" else None
            if m and m.group(1).lower() == "include":
                names = [n.strip() for n in m.group(2).split(",") if n.strip()]
                if not names:
                    raise SpecError("include: needs a profile name", path=str(path), line=no)
                includes += [(n, no) for n in names]
            elif m:
                meta.setdefault(m.group(1).lower(), m.group(2).strip())
            continue
        key, value, optional = _checked_assignment(raw, path, no, check_sysctl, seen)
        settings.append(Setting(key, value, optional, str(path), no))
    return meta, settings, includes


def _parse_nic(path: Path) -> list[Setting]:
    settings: list[Setting] = []
    seen: set[str] = set()
    for no, raw in enumerate(_read_lines(path), 1):
        stripped = raw.strip()
        if not stripped or stripped[0] in "#;":
            continue
        key, value, optional = _checked_assignment(raw, path, no, check_nic, seen)
        settings.append(Setting(NIC_PREFIX + key, value.lower() if key.startswith(
            ("pause.", "coalesce.adaptive")) else value, optional, str(path), no))
    return settings


def render_sysctl_d(profile: Profile, *, header: str = "") -> str:
    """The flattened sysctl part as a sysctl.d file (what --persist writes)."""
    lines = [f"# gridxfer profile {profile.name} (flattened, includes resolved)"]
    if profile.source:
        lines.append(f"# source: {profile.source}")
    if profile.intent:
        lines.append(f"# intent: {profile.intent}")
    if header:
        lines += [f"# {h}" for h in header.splitlines()]
    lines += [f"{'-' if s.optional else ''}{s.key} = {s.value}" for s in profile.sysctl]
    return "\n".join(lines) + "\n"
