"""The campaign's value types: what ``load_spec`` returns and the journal stores
(``spec_to_dict``/``spec_from_dict`` round-trip it so ``resume`` needs no campaign file)."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

SCHEMES = frozenset({"root", "xroot", "roots", "gsiftp", "ftp", "file", "http", "https", "davs"})
VERIFY_MODES = ("source", "destination", "both", "none")
ALGORITHMS = ("adler32",)
_HEX8 = re.compile(r"[0-9a-fA-F]{1,8}")


@dataclass(frozen=True)
class FileItem:
    name: str                       # relative to the source base URL
    size: int | None = None         # None: looked up with the mover's stat
    adler32: str | None = None      # expected checksum, 8 lowercase hex digits
    priority: int | None = None     # 1-5 (FTS3's); None: the campaign's
    activity: str | None = None     # FTS3's activity; None: the campaign's


@dataclass(frozen=True)
class StagingSpec:
    """``source.bring_online``: the source is on tape; each file is staged (brought online
    and pinned) before it is copied (FTS3's bring_online and copy_pin_lifetime)."""
    timeout: float                          # s: a file not online by then fails (staging)
    pin_lifetime: float = 3600.0            # s: how long the storage keeps it online


@dataclass(frozen=True)
class TokenSpec:
    """Where a bearer token comes from (``campaign.spec.tokens``): exactly one of ``file``,
    ``env``, ``command``; none of them: the WLCG discovery rules. Never the token itself.
    ``base``: the storage path the token's scopes are relative to (the server's base_path)."""
    file: str | None = None
    env: str | None = None
    command: tuple[str, ...] = ()
    timeout: float = 30.0
    base: str = "/"

    @property
    def discovery(self) -> bool:
        return self.file is None and self.env is None and not self.command


@dataclass(frozen=True)
class SourceSpec:
    url: str                                # base URL (ends with '/')
    files: tuple[FileItem, ...] = ()        # explicit list
    glob: str | None = None
    recursive: bool = False
    list_file: str | None = None            # absolute path of a 'name size [adler32]' list
    bring_online: StagingSpec | None = None  # a tape-backed source: stage before copying
    token: TokenSpec | None = None          # the source's bearer token (None: discovery)

    @property
    def mode(self) -> str:
        if self.list_file:
            return "list-file"
        if self.recursive:
            return "recursive"
        return "glob" if self.glob is not None else "list"


@dataclass(frozen=True)
class TierSpec:
    name: str
    pool: tuple[str, ...]
    streams: int = 1
    max_active: int = 4
    min_active: int = 1
    # no max_active in the campaign file: the run picks the tier's ceiling from its files
    # (engine/ceilings.py) and ``max_active`` above is only a placeholder
    auto_ceiling: bool = False
    tcp_buffer: int | None = None
    selector: str | None = None
    # ``archive: {timeout: ...}``: a tape-backed tier; a copied file is done only once the
    # storage says it is on tape, and fails ``archive_timeout`` after this many seconds
    archive_timeout: float | None = None
    token: TokenSpec | None = None          # the tier's bearer token (None: discovery)
    # (endpoint URL, its own token source) for pool entries given as {url, token}
    endpoint_tokens: tuple[tuple[str, TokenSpec], ...] = ()

    def token_for(self, endpoint: str) -> TokenSpec | None:
        return next((t for u, t in self.endpoint_tokens if u == endpoint), self.token)
    priority: int = 3               # 1-5: a higher tier is served first in each dispatch round


@dataclass(frozen=True)
class ChecksumSpec:
    algorithm: str | None = "adler32"       # None: no checksum at all
    verify: str = "both"


@dataclass(frozen=True)
class RetrySpec:
    max: int = 3
    backoff: float = 30.0                   # seconds before the first retry; doubles after


@dataclass(frozen=True)
class CircuitSpec:
    """The circuit breaker's cooldowns (``exclusions.DefaultExclusions``)."""
    cooldown: float = 15.0                  # seconds an endpoint stays out after a trip
    max_cooldown: float = 300.0             # the cooldown doubles on each re-trip, up to this


@dataclass(frozen=True)
class EngineSpec:
    """``engine:`` and ``fts3:`` (spec/engine.py): who moves the files."""
    kind: str = "local"                 # local | fts3
    endpoint: str | None = None         # the FTS3 REST endpoint (https://host:8446)
    proxy: str | None = None            # X.509 proxy (None: X509_USER_PROXY, /tmp/x509up_u<uid>)
    reuse: str = "auto"                 # auto: jobs of small files ask for session reuse
    token: TokenSpec | None = None      # a bearer token for FTS3 (None: the X.509 proxy)


@dataclass(frozen=True)
class CampaignSpec:
    name: str
    source: SourceSpec
    destinations: tuple[TierSpec, ...]
    checksum: ChecksumSpec = ChecksumSpec()
    retries: RetrySpec = RetrySpec()
    timeout: float = 3600.0
    overwrite: bool = False
    third_party: bool = False
    circuit_breaker: CircuitSpec = CircuitSpec()
    pool_down_wait: float = 0.0             # on_pool_down: 0 = fail, else wait up to this (s)
    path: str = ""                          # the campaign file it came from
    inventory: bool = False                 # endpoint names were resolved via the testbed inventory
    priority: int = 3                       # FTS3's 1-5: the files' default priority
    activity: str = "default"               # FTS3's activity: the files' default
    activity_shares: tuple[tuple[str, float], ...] = ()   # each link's slots, by weight
    job_metadata: str | None = None         # FTS3's job_metadata, as canonical JSON
    names: tuple[tuple[str, str], ...] = ()  # (URL, name): pool `name:`s and inventory names
    engine: EngineSpec = EngineSpec()       # local, or handed to FTS3 (spec/engine.py)
    extra: dict = field(default_factory=dict, compare=False)

    def urls(self) -> tuple[str, ...]:
        """Every URL the campaign names: the source's, then each tier's pool, in order."""
        return (self.source.url, *(u for t in self.destinations for u in t.pool))

    def tier(self, name: str) -> TierSpec:
        """The destination tier ``name`` (the first of that name; StopIteration if none).
        Asked once a file by the dispatcher and the FTS3 engine: a dict, built once."""
        found = self._tier_index.get(name)
        return found if found is not None else next(
            t for t in self.destinations if t.name == name)

    @functools.cached_property
    def _tier_index(self) -> dict[str, TierSpec]:
        return {t.name: t for t in reversed(self.destinations)}     # the first name wins


def by_priority(tiers: tuple[TierSpec, ...]) -> tuple[TierSpec, ...]:
    """The tiers, higher FTS3 ``priority`` first (as listed among equals): the order each
    dispatch round serves them in, and the order their files are planned in."""
    return tuple(sorted(tiers, key=lambda t: -t.priority))


def spec_to_dict(spec: CampaignSpec) -> dict[str, Any]:
    """A JSON-able dict; stored in the journal so `resume` needs no campaign file."""
    from dataclasses import asdict
    d = asdict(spec)
    d.pop("extra", None)
    return d


def spec_from_dict(d: dict[str, Any]) -> CampaignSpec:
    src = dict(d["source"])
    src["files"] = tuple(FileItem(**f) for f in src.get("files", ()))
    if src.get("bring_online"):
        src["bring_online"] = StagingSpec(**src["bring_online"])
    src["token"] = _token(src.get("token"))
    return CampaignSpec(
        name=d["name"], source=SourceSpec(**src),
        destinations=tuple(_tier(t) for t in d["destinations"]),
        checksum=ChecksumSpec(**d["checksum"]), retries=RetrySpec(**d["retries"]),
        timeout=d["timeout"], overwrite=d["overwrite"], third_party=d["third_party"],
        circuit_breaker=CircuitSpec(**d.get("circuit_breaker", {})),
        pool_down_wait=d.get("pool_down_wait", 0.0),
        path=d.get("path", ""), inventory=d.get("inventory", False),
        priority=d.get("priority", 3), activity=d.get("activity", "default"),
        activity_shares=tuple((str(a), float(w)) for a, w in d.get("activity_shares", ())),
        job_metadata=d.get("job_metadata"),
        names=tuple((str(u), str(n)) for u, n in d.get("names", ())),
        engine=_engine(d.get("engine", {})))


def _engine(d: dict[str, Any]) -> EngineSpec:
    return EngineSpec(**{**d, "token": _token(d.get("token"))})


def _token_of(d: dict[str, Any]) -> TokenSpec:
    return TokenSpec(**{**d, "command": tuple(d.get("command", ()))})


def _token(d: dict[str, Any] | None) -> TokenSpec | None:
    return None if d is None else _token_of(d)


def _tier(t: dict[str, Any]) -> TierSpec:
    eps = tuple((u, _token_of(ts)) for u, ts in t.get("endpoint_tokens", ()))
    return TierSpec(**{**t, "pool": tuple(t["pool"]), "token": _token(t.get("token")),
                       "endpoint_tokens": eps})
