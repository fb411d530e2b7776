"""The testbed inventory: which servers run, where, and what clients need to use them.

Written by ``gridxfer testbed up`` (local loopback grid or netns grid) as readable JSON
at ``$GRIDXFER_HOME/testbed/inventory.json``. Campaign files may name an endpoint
(``t1a-gsiftp``) instead of giving its URL; :meth:`Inventory.resolve` does the mapping.

API::

    inv = load_inventory()                 # GridxferError if no testbed is up
    inv.resolve("t1a-xrd1")                # -> "root://127.0.0.1:40123//data/"
    inv.resolve("t1a-xrd1/sub/f.root")     # -> "root://127.0.0.1:40123//data/sub/f.root"
    inv.resolve("t1a-davs1/sub/f.root")    # -> "davs://127.0.0.1:40123/data/sub/f.root"
    inv.client_env()                       # X509_CERT_DIR, X509_USER_PROXY, ... for clients
    inv.local_path("gsiftp://localhost:4100/tmp/.../data/f")  # -> Path on disk (or None)
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from gridxfer import state
from gridxfer.errors import GridxferError, SpecError
from gridxfer.redact import WHERE_CREDENTIALS_GO, credential_in_url, redact

INVENTORY_NAME = "inventory.json"
Mode = Literal["local", "netns"]


class TestbedError(GridxferError):
    """The testbed could not be brought up, found, or torn down."""

    __test__ = False   # not a pytest test class, despite the name


@dataclass(frozen=True)
class Endpoint:
    """One storage endpoint of the testbed.

    ``url`` is the base URL of the endpoint's data area and always ends with ``/``;
    ``data_dir`` is the same area on disk (for tests that inspect or corrupt files).
    An xrootd also serves the same area as ``davs_url`` (XrdHttp over TLS), which the
    inventory also resolves under the name ``davs_name``. ``auth`` is what ``url`` asks of
    a client (``none``, ``ztn``: a bearer token, ``gsi``: an X.509 proxy), ``davs_auth``
    what ``davs_url`` asks (``none``: anonymous, an X.509 proxy is accepted; ``token``);
    token scopes are relative to ``token_base`` (``storage.read:/f`` is ``/data/f``).
    A tape-backed endpoint (``tape_backed``) answers XRootD ``query prepare`` / ``prepare``
    from an emulated tape whose drives log to ``tape_log`` (testbed/tapexrd.py).
    """

    name: str
    url: str
    protocol: str          # "root" | "roots" | "gsiftp" | "ftp"
    tier: str
    data_dir: str
    pid: int
    log: str
    kind: str = ""         # "xrootd" | "gsiftp" | "ftp"
    port: int = 0
    host: str = ""         # the host (netns name) the server runs on; "" = this machine
    throttle: float | None = None    # bytes/s, if the server is throttled
    size_limit: int | None = None    # bytes, if the data dir is a size-limited mount
    davs_url: str = ""     # the same data area over davs:// ("" if the server has no HTTP)
    davs_name: str = ""    # the inventory name of davs_url ("" = none)
    auth: str = ""         # what url asks for: "none" | "ztn" | "gsi" ("" = not recorded)
    davs_auth: str = ""    # what davs_url asks for: "none" | "token"
    token_base: str = ""   # the server path token scopes are relative to
    # tape-backed (testbed/tapexrd.py): the emulated tape's CTA-format log ("" = disk only),
    # its drives and per-drive rate (bytes/s)
    tape_log: str = ""
    tape_drives: int = 0
    tape_rate: float | None = None

    @property
    def tape_backed(self) -> bool:
        return bool(self.tape_log)

    def path_of(self, url: str) -> Path | None:
        """The on-disk path of ``url`` if it lies on this endpoint, else None."""
        base_url = next(
            (b for b in (self.url, self.davs_url) if b and _same_endpoint(b, url)), None
        )
        if base_url is None:
            return None
        base, path = _url_path(base_url), _url_path(url)
        if path.rstrip("/") + "/" == base:
            return Path(self.data_dir)
        if not path.startswith(base):
            return None
        return Path(self.data_dir) / path[len(base):]


@dataclass(frozen=True)
class Inventory:
    mode: Mode
    endpoints: dict[str, Endpoint]
    env: dict[str, str]
    base_dir: str
    pids: dict[str, int] = field(default_factory=dict)   # server name -> pid
    mounts: tuple[str, ...] = ()                          # size-limited mounts to remove
    extra: dict[str, Any] = field(default_factory=dict)   # mode-specific (netns topology...)

    def resolve(self, name_or_url: str) -> str:
        """An endpoint name (optionally ``name/sub/path``) -> URL; URLs pass through."""
        if "://" in name_or_url:
            return name_or_url
        name, _, rest = name_or_url.partition("/")
        if name in self.endpoints:
            return self.endpoints[name].url + rest
        davs = {ep.davs_name: ep.davs_url for ep in self.endpoints.values() if ep.davs_name}
        if name in davs:
            return davs[name] + rest
        known = ", ".join(sorted([*self.endpoints, *davs])) or "none"
        raise TestbedError(f"unknown testbed endpoint {name!r} (known: {known})")

    def client_env(self) -> dict[str, str]:
        """Environment variables a client (gfal2, XrdCl, globus-url-copy) needs."""
        return dict(self.env)

    def local_path(self, url: str) -> Path | None:
        """The on-disk path behind a URL on one of the endpoints, or None."""
        for ep in self.endpoints.values():
            path = ep.path_of(url)
            if path is not None:
                return path
        return None

    def to_json(self) -> dict[str, Any]:
        obj = dataclasses.asdict(self)
        obj["mounts"] = list(self.mounts)
        return obj

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Inventory:
        eps = {name: Endpoint(**ep) for name, ep in obj.get("endpoints", {}).items()}
        return cls(mode=obj["mode"], endpoints=eps, env=dict(obj.get("env", {})),
                   base_dir=obj["base_dir"],
                   pids={k: int(v) for k, v in obj.get("pids", {}).items()},
                   mounts=tuple(obj.get("mounts", ())), extra=dict(obj.get("extra", {})))


def testbed_dir() -> Path:
    """``$GRIDXFER_HOME/testbed`` (created 0700)."""
    return state.subdir("testbed")


def inventory_path() -> Path:
    return testbed_dir() / INVENTORY_NAME


def save_inventory(inv: Inventory) -> Path:
    path = inventory_path()
    state.write_json(path, inv.to_json())
    return path


def load_inventory(path: Path | None = None) -> Inventory:
    """The inventory of the running testbed; TestbedError if there is none."""
    path = Path(path) if path else inventory_path()
    if not path.exists():
        raise TestbedError(f"no testbed is up (no {path}); run `gridxfer testbed up` first")
    try:
        inv = Inventory.from_json(state.read_json(path))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise TestbedError(f"unreadable testbed inventory {path}: {exc}") from exc
    for name, ep in inv.endpoints.items():
        for key in ("url", "davs_url"):
            what = credential_in_url(getattr(ep, key))
            if what:
                raise SpecError(f"the URL {redact(getattr(ep, key))!r} carries {what}: "
                                f"{WHERE_CREDENTIALS_GO}", path=str(path),
                                field=f"endpoints.{name}.{key}")
    return inv


def remove_inventory() -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(inventory_path())


def _url_path(url: str) -> str:
    """The path part of a URL, normalised: ``root://h:1//data/x`` -> ``/data/x``."""
    path = urlsplit(url).path
    while path.startswith("//"):
        path = path[1:]
    return path or "/"


# Schemes that reach the same server: davs:// is https:// for WebDAV clients, roots://
# is root:// over TLS.
_SAME_SCHEME = {"davs": "https", "dav": "http", "roots": "root", "xroot": "root", "xroots": "root"}


def _netloc(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if host in ("localhost", "127.0.0.1", "::1", "ip6-localhost"):
        host = "localhost"
    return _SAME_SCHEME.get(parts.scheme, parts.scheme), host, parts.port


def _same_endpoint(a: str, b: str) -> bool:
    return _netloc(a) == _netloc(b)
