"""``engine: local | fts3`` and the ``fts3:`` block (issue 23): who moves the files.

``fts3: {endpoint: https://fts.example:8446, proxy: /path, token: {...}, reuse: auto,
overwrite_hop: false}``. Refused here, at file:line, what an FTS3 server would refuse at
submission (fts-rest's ``validate_url`` and overwrite rules), so nothing is submitted:

- a ``file://`` source or destination: FTS3 "can not transfer local files";
- ``overwrite_hop: true``: fts-rest refuses it without ``multihop``, and gridxfer submits
  single-hop jobs only;
- gridxfer's ``job_metadata`` (the user's plus the campaign's name) over the server's
  ``JobMetadataSizeLimit`` (2048 bytes of JSON in the configuration fts-rest ships);
- what the server refuses for the way gridxfer authenticates (``auth_conflicts``; measured
  on fts-rest-flask 3.13.4, docs/fts3.md): a storage ``token:`` with an X.509 proxy
  (per-file tokens are kept in ``t_token`` for token users only: a proxy's job fails on
  ``t_file``'s foreign key, HTTP 409), and with ``fts3.token`` an ``archive`` tier or a
  ``bring_online`` source ("... to tape using token authentication are not supported").
"""
from __future__ import annotations

import json
from dataclasses import replace
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import SplitResult, urlsplit

from yaml.nodes import Node

from gridxfer.campaign.spec.model import CampaignSpec, EngineSpec, SourceSpec, TierSpec
from gridxfer.errors import UsageError
from gridxfer.redact import redact
from gridxfer.campaign.spec.nodes import Checker
from gridxfer.campaign.spec.tokens import token_spec

ENGINES = ("local", "fts3")
REUSE = ("auto", "always", "never")
__all__ = ["EngineSpec", "engine_spec"]
# bytes of JSON: JobMetadataSizeLimit in the fts3restconfig fts-rest ships (its code falls
# back to 1024 without the key); measured on fts-rest-flask: 2048 accepted, 2100 refused
JOB_METADATA_LIMIT = 2048
_KEYS = ("endpoint", "proxy", "token", "reuse", "overwrite_hop")


def _parts(url: str) -> SplitResult | None:
    try:
        parts = urlsplit(url)
        parts.port                      # noqa: B018  (raises on a bad port)
        return parts
    except ValueError:                  # "Invalid IPv6 URL", a port out of range
        return None


def endpoint_problem(url: str) -> str | None:
    """Why ``url`` is not an FTS3 REST URL (https://host:8446), or None."""
    parts = _parts(url)
    if parts is None or parts.scheme not in ("https", "http") or not parts.hostname \
            or any(not ch.isprintable() or ch.isspace() for ch in url):
        return f"expected the FTS3 REST URL (https://host:8446), got {redact(url)!r}"
    if parts.username or parts.password or parts.query or parts.fragment:
        shown = url.split("#", 1)[0] + ("#***" if parts.fragment else "")
        return f"no user, password, query or fragment in the FTS3 URL, got {redact(shown)!r}"
    return None


def endpoint_url(c: Checker, node: Node, where: str) -> str:
    url = c.string(node, where)
    problem = endpoint_problem(url)
    if problem:
        raise c.fail(node, where, problem)
    return url.rstrip("/")


def engine_spec(c: Checker, top: dict[str, Node], base_dir: Path) -> EngineSpec:
    kind = "local"
    if "engine" in top:
        kind = c.string(top["engine"], "engine")
        if kind not in ENGINES:
            raise c.fail(top["engine"], "engine", f"expected one of {', '.join(ENGINES)}, "
                                                  f"got {kind!r}")
    if "fts3" not in top:
        if kind == "fts3":
            raise c.fail(top["engine"], "engine", "engine: fts3 needs fts3: {endpoint: URL} "
                                                  "(or --fts3 URL)")
        return EngineSpec(kind=kind)
    node = top["fts3"]
    m = c.mapping(node, "fts3", _KEYS, required=("endpoint",))
    endpoint = endpoint_url(c, m["endpoint"], "fts3.endpoint")
    proxy = c.string(m["proxy"], "fts3.proxy") if "proxy" in m else None
    token = token_spec(c, m["token"], "fts3.token", base_dir) if "token" in m else None
    if token is not None and proxy is not None:
        raise c.fail(m["token"], "fts3.token", "give fts3.token or fts3.proxy, not both")
    reuse = "auto"
    if "reuse" in m:
        raw = c.value(m["reuse"], "fts3.reuse")
        reuse = ("always" if raw else "never") if isinstance(raw, bool) else raw
        if reuse not in REUSE:
            raise c.fail(m["reuse"], "fts3.reuse", f"expected auto, true or false, got {raw!r}")
    if "overwrite_hop" in m and c.boolean(m["overwrite_hop"], "fts3.overwrite_hop"):
        raise c.fail(m["overwrite_hop"], "fts3.overwrite_hop",
                     "FTS3 refuses 'overwrite-hop' without a multihop job, and gridxfer "
                     "submits single-hop jobs")
    return EngineSpec(kind=kind, endpoint=endpoint, proxy=proxy, reuse=reuse, token=token)


def auth_conflicts(engine: EngineSpec, source: SourceSpec,
                   dests: Sequence[TierSpec]) -> list[tuple[str, str]]:
    """(where, why) of what fts-rest refuses for this authentication (module docstring)."""
    out: list[tuple[str, str]] = []
    if engine.token is None:            # X.509: the proxy (given, or the client's rules)
        sides = [("source.token", source.token is not None)]
        sides += [(f"destinations.{t.name}.token", t.token is not None
                   or bool(t.endpoint_tokens)) for t in dests]
        out += [(where, "FTS3 keeps storage tokens only from a token-authenticated "
                        "submission: give fts3.token, not an X.509 proxy (with a proxy "
                        "fts-rest refuses the job: HTTP 409)") for where, has in sides if has]
        return out
    if source.bring_online is not None:
        out.append(("source.bring_online", "FTS3 refuses to stage from tape for a "
                                           "token-authenticated submission: use fts3.proxy"))
    out += [(f"destinations.{t.name}.archive", "FTS3 refuses to archive to tape for a "
                                               "token-authenticated submission: use fts3.proxy")
             for t in dests if t.archive_timeout is not None]
    return out


def local_urls(urls: Sequence[tuple[str, Node | None, str]], c: Checker) -> None:
    """FTS3 cannot transfer local files (fts-rest ``validate_url``): refuse them."""
    for url, node, where in urls:
        if urlsplit(url).scheme in ("", "file"):
            c.record(c.fail(node, where, f"FTS3 cannot transfer local files ({url}); "
                                         f"use engine: local"))


def metadata_size(c: Checker, node: Node | None, name: str, user: str | None) -> None:
    """The job_metadata gridxfer sends must fit the server's limit."""
    meta: dict = {"gridxfer_campaign": name, "tier": "x" * 64, "round": 99}
    if user is not None:
        meta["user"] = json.loads(user)
    size = len(json.dumps(meta))
    if size > JOB_METADATA_LIMIT:
        c.record(c.fail(node, "job_metadata", f"{size} bytes as FTS3 job_metadata with the "
                                              f"campaign's name; FTS3 takes at most "
                                              f"{JOB_METADATA_LIMIT}"))


def override(spec: CampaignSpec, kind: str | None, endpoint: str | None) -> CampaignSpec:
    """``campaign run --engine fts3 --fts3 URL`` over the campaign file's choice, with the
    refusals ``engine_spec`` makes at file:line (here in one line, exit 2)."""
    if kind is None and endpoint is None:
        return spec
    if kind is not None and kind not in ENGINES:
        raise UsageError(f"--engine: expected one of {', '.join(ENGINES)}, got {kind!r}")
    eng = spec.engine
    if endpoint is not None:
        problem = endpoint_problem(endpoint)
        if problem:
            raise UsageError(f"--fts3: {problem}")
        eng = replace(eng, endpoint=endpoint.rstrip("/"), kind=kind or "fts3")
    elif kind is not None:
        eng = replace(eng, kind=kind)
    if eng.kind == "fts3":
        if not eng.endpoint:
            raise UsageError("--engine fts3 needs --fts3 URL or fts3: {endpoint: URL} in the "
                             "campaign file")
        for url in spec.urls():
            if urlsplit(url).scheme in ("", "file"):
                raise UsageError(f"FTS3 cannot transfer local files ({url}); use --engine local")
        for where, why in auth_conflicts(eng, spec.source, spec.destinations):
            raise UsageError(f"{spec.path or 'campaign'}: {where}: {why}")
    return replace(spec, engine=eng)
