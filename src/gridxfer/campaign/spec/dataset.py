"""Dataset expansion: turn a validated ``SourceSpec`` into ``(name, src_url, size)`` entries.

Explicit lists and list files are read as given (a missing size is looked up with the
mover's ``stat``); globs and recursive listings ask the mover for a listing with sizes
(``gridxfer.movers.registry.mover_for(url).listdir``). ``file://`` sources are listed
directly so that the planner works without any mover installed. Entries are yielded
lazily, so a list of a million files never sits in memory twice.

Every name goes through the one rule of ``gridxfer.movers.names``: it is quoted for the
source's protocol, and a name the rule refuses becomes an entry with ``bad`` set (the
file fails alone with class ``bad_name``; nothing is read).
"""
from __future__ import annotations

import errno
import fnmatch
import functools
import os
import stat as stat_mod
from dataclasses import dataclass
from collections.abc import Callable, Iterator

from gridxfer.errors import SpecError, SpecErrors, TransferError, UsageError
from gridxfer.inputs import check_utf8_line
from gridxfer.limits import MAX_FILE_SIZE
from gridxfer.redact import WHERE_CREDENTIALS_GO, credential_in_url, redact
from gridxfer.movers import names
from gridxfer.movers.base import Mover
from gridxfer.movers.capabilities import capabilities_of
from gridxfer.movers.urls import local_path, scheme_of
from gridxfer.campaign.spec.schema import SourceSpec, _HEX8
from gridxfer.campaign.spec.within import Within


@dataclass(frozen=True)
class DatasetEntry:
    name: str                     # relative to the source base; also the destination name
    src_url: str
    size: int
    adler32: str | None = None    # expected checksum, if known
    bad: str | None = None        # why the name is refused (movers/names.py), if it is


def join_url(base: str, name: str) -> str:
    """The URL of ``name`` under ``base``, quoted for base's protocol (never raises)."""
    return names.join_url(base, name, check=False)


def entry(base: str, name: str, size: int | None, adler32: str | None = None, *,
          component: str | None = None, within: Within | None = None) -> DatasetEntry:
    """The entry of ``name`` under ``base``; a bad name gives an entry with ``bad`` set
    (and ``size`` None is looked up only for a good name). ``within``: a local file that
    may be reached through a symbolic link must resolve inside ``base``."""
    try:
        if component is not None:
            names.check_component(component)
        url = names.join_url(base, name)
        if within is not None:
            within.check(url)
    except TransferError as exc:
        return DatasetEntry(name, join_url(base, name), size or 0, adler32,
                            bad=str(exc).partition(": ")[2])
    return DatasetEntry(name, url, size if size is not None else _stat_size(url), adler32)


def refusal(e: DatasetEntry, pool: tuple[str, ...]) -> str | None:
    """Why ``e`` fails at plan time on a tier of ``pool``: its own ``bad``, or the reason an
    endpoint's protocol cannot carry its name (``ftp://`` and a non-ASCII name). One
    endpoint refusing is enough: the tier's selector may place the file on any of them."""
    if e.bad is not None:
        return e.bad
    for scheme, url in _schemes(pool):
        try:
            names.quote_name(scheme, e.name)
        except TransferError as exc:
            return f"{str(exc).partition(': ')[2]} (destination {url})"
    return None


@functools.lru_cache(maxsize=64)
def _schemes(pool: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Each scheme of ``pool`` once, with its first endpoint: the name rule is the
    protocol's, so a pool of four root:// servers asks it once a file, not four times
    (planning runs this for every file and tier)."""
    first: dict[str, str] = {}
    for url in pool:
        first.setdefault(scheme_of(url), url)
    return tuple(first.items())


def expand(source: SourceSpec) -> Iterator[DatasetEntry]:
    """Every file of the source, with its size. Raises UsageError if the source is unusable."""
    within = Within(source.url) if source.url.startswith("file:") else None
    if source.mode == "list":
        for item in source.files:
            yield entry(source.url, item.name, item.size, item.adler32, within=within)
    elif source.mode == "list-file":
        yield from _list_file(source, within)
    else:
        yield from _listing(source, within)


MAX_LIST_ERRORS = 100          # a list file's errors reported in one run, at most


def _list_file(source: SourceSpec, within: Within | None) -> Iterator[DatasetEntry]:
    """The list file's entries; every bad line is reported at the end, all at once (up to
    ``MAX_LIST_ERRORS``), each ``file:line: field: message`` (nothing is planned then)."""
    path = source.list_file or ""
    try:
        fh = open(path, "rb")  # noqa: SIM115  (closed by the `with` below; only open() is guarded)
    except OSError as exc:
        raise SpecError(f"cannot read: {exc.strerror or exc}", path=path) from None
    errors: list[SpecError] = []
    with fh:
        for lineno, raw in enumerate(fh, 1):
            try:
                found = _list_line(source, path, lineno, raw, within)
            except SpecError as exc:
                errors.append(exc)
                if len(errors) >= MAX_LIST_ERRORS:
                    break
                continue
            if found is not None and not errors:
                yield found
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise SpecErrors(errors)


def _list_line(source: SourceSpec, path: str, lineno: int, raw: bytes,
               within: Within | None = None) -> DatasetEntry | None:
    text = check_utf8_line(raw, path, lineno).strip()
    if not text or text.startswith("#"):
        return None
    parts = text.split()
    if len(parts) not in (2, 3):
        raise SpecError("expected 'name size [adler32]'", path=path, line=lineno)
    name, size_text = parts[0], parts[1]
    if name.startswith("/") or ".." in name.split("/") or "://" in name:
        raise SpecError(f"{_short(redact(name))} must be relative", path=path,
                        line=lineno, field="name")
    what = credential_in_url(name)
    if what:
        raise SpecError(f"the name carries {what}: {WHERE_CREDENTIALS_GO}", path=path,
                        line=lineno, field="name")
    if not (size_text.isascii() and size_text.isdigit()):
        raise SpecError(f"not a size in bytes: {_short(size_text)}", path=path,
                        line=lineno, field="size")
    too_big = MAX_FILE_SIZE.above(int(size_text), _short(size_text))
    if too_big:
        raise SpecError(too_big, path=path, line=lineno, field="size")
    adler = None
    if len(parts) == 3:
        if not _HEX8.fullmatch(parts[2]):
            raise SpecError(f"not an adler32: {parts[2]!r}", path=path, line=lineno,
                            field="adler32")
        adler = parts[2].lower().zfill(8)
    return entry(source.url, name, int(size_text), adler, within=within)


def _short(text: str) -> str:
    return repr(text) if len(text) <= 40 else f"{text[:20]!r}... ({len(text)} chars)"


def _listing(source: SourceSpec, within: Within | None) -> Iterator[DatasetEntry]:
    """A listing's files; only those it reached through a link are checked ``within``."""
    pattern = source.glob or "*"
    walk = _walk_local if source.url.startswith("file:") else _walk_mover
    for rel, size, component, linked in walk(source.url, source.recursive):
        if fnmatch.fnmatchcase(component, pattern):
            yield entry(source.url, rel, size, component=component,
                        within=within if linked else None)


def _local_path(url: str) -> str:
    return local_path(url)


def _walk_local(base: str, recursive: bool) -> Iterator[tuple[str, int | None, str, bool]]:
    """(name, size, last component, reached through a symbolic link) of every file. A link
    that cannot be followed (to nothing, a loop) is listed with no size: the plan stats it
    (``_stat_size``: a missing target is journalled, and its transfer fails it alone as
    source_missing), where it used to end the whole plan with a traceback's last line."""
    root = _local_path(base)
    if not os.path.isdir(root):
        raise UsageError(f"source is not a directory: {base}")
    stack = [("", False)]
    while stack:
        rel_dir, in_link = stack.pop()
        try:
            with os.scandir(os.path.join(root, rel_dir)) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            raise UsageError(f"cannot list {join_url(base, rel_dir)}: {exc.strerror}") from None
        subdirs = []
        for e in entries:
            rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
            linked = in_link or e.is_symlink()
            try:
                st = e.stat(follow_symlinks=True)
            except OSError:
                if e.is_symlink() and not _is_temp(e.name):
                    yield rel, None, e.name, True
                continue                        # not a link: gone since it was listed
            if stat_mod.S_ISDIR(st.st_mode):
                subdirs.append((rel, linked))
            elif stat_mod.S_ISREG(st.st_mode) and not _is_temp(e.name):
                yield rel, st.st_size, e.name, linked
        if recursive:
            stack.extend(reversed(subdirs))


def _is_temp(name: str) -> bool:
    """Names our movers use while writing are never part of a dataset."""
    return _temp_name_check()(name)


@functools.cache
def _temp_name_check() -> Callable[[str], bool]:
    """movers.urls' check, imported once (not once per file listed)."""
    from gridxfer.movers.urls import is_temp_name
    return is_temp_name


def _mover(url: str) -> Mover:
    try:
        from gridxfer.movers.registry import mover_for
    except ImportError as exc:
        raise UsageError(f"cannot list {url}: no mover registry ({exc})") from None
    return mover_for(url)


def _walk_mover(base: str, recursive: bool) -> Iterator[tuple[str, int, str, bool]]:
    mover = _mover(base)
    listdir = capabilities_of(mover).listdir
    if listdir is None:
        raise UsageError(f"{mover.name} cannot list {base}")
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        url = join_url(base, rel_dir) + "/" if rel_dir else base
        try:
            entries = listdir(url)
        except TransferError as exc:
            raise UsageError(f"cannot list {url}: {exc}") from None
        subdirs = []
        for e in sorted(entries, key=lambda x: x.url):
            name = names.listed_name(e.url)
            if not name or name in (".", ".."):
                continue
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if e.is_dir and _good_dir(base, name):
                subdirs.append(rel)
            elif e.is_dir:          # never listed through a URL that names another place:
                yield rel, 0, name, False   # one bad_name entry for the whole directory
            elif not _is_temp(name):
                yield rel, e.size, name, False
        if recursive:
            stack.extend(reversed(subdirs))


def _good_dir(base: str, name: str) -> bool:
    try:
        names.check_component(name)
        names.join_url(base, name)
    except TransferError:
        return False
    return True


def _stat_size(url: str) -> int:
    if url.startswith("file:"):
        try:
            return os.stat(_local_path(url)).st_size
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ELOOP):    # missing, a link to nothing or
                return 0    # a loop: journalled; the transfer fails it alone (source_missing)
            raise UsageError(f"cannot stat {url}: {exc.strerror}") from None
    mover = _mover(url)
    stat = capabilities_of(mover).stat
    if stat is None:
        raise UsageError(f"no size given for {url} and {mover.name} cannot stat")
    try:
        return int(stat(url).size)
    except TransferError as exc:
        if exc.error_class.value == "source_missing":
            return 0
        raise UsageError(f"cannot stat {url}: {exc}") from None
