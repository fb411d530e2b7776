"""The endpoint probes of ``campaign run --dry-run`` (``dryrun.py``): every endpoint asked
once, as a run's transfers would ask it, with the tokens they would carry.

A destination probe asks the endpoint's own mover, once: ``stat`` of the pool directory
(reachable; a missing directory is fine, a run creates it), a 16-byte file written through
the campaign's integrity path under a hidden probe name and deleted again (writable), and
its free space as a run's exclusions ask it (``policy.space.query_free``: root:// of the
nearest existing directory), flagged when below the endpoint's even share of its tier's
bytes. The source is stat-ed (reachable). Every request carries the token a run's would
(``Credentials``: the source's for the source, the endpoint's own or its tier's for a
destination, the WLCG discovery rules for a side without ``token:``); an endpoint whose
tier a run would pause, or whose files it would refuse, for want of a token is flagged
with that reason and not contacted. A token that may create files but not delete them
(an upload token) gets no probe file: it would stay behind. Probes run in parallel
(``gridxfer-probe-N`` threads), each bounded by ``PROBE_TIMEOUT``; the tokens are read
before, in the calling thread (``Credentials`` is one thread's).
"""
from __future__ import annotations

import concurrent.futures
import functools
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from gridxfer.errors import ErrorClass, GridxferError, TransferError
from gridxfer.movers import names, tokens as movers_tokens
from gridxfer.movers.base import TokenPair, TransferParams
from gridxfer.movers.capabilities import capabilities_of
from gridxfer.movers.urls import url_path
from gridxfer.redact import redact
from gridxfer.auth.tokens import TokenError, parse
from gridxfer.campaign.engine.credentials import Credentials, Grant, check
from gridxfer.campaign.policy.space import query_free
from gridxfer.campaign.spec.model import CampaignSpec, TokenSpec, by_priority

PROBE_TIMEOUT = 30.0        # s: one endpoint's probe (stat, write, delete, space)
PROBE_DATA = b"gridxfer probe\n\0"
R = TypeVar("R")


@dataclass(frozen=True)
class Probe:
    role: str                   # "source", or the tier
    url: str
    reachable: bool | None      # None: not asked (an explicit list was not contacted)
    writable: bool | None = None    # None: not tried (the source)
    free: int | None = None     # bytes, where the protocol tells
    problem: str = ""           # why a run could not use it ("" = fine)


@dataclass(frozen=True)
class EndpointGrant:
    probe_url: str              # the probe file a destination's probe writes ("": source)
    grant: Grant                # what a run's transfer there would carry
    deletes: bool = True        # its token may delete the probe file again

    @property
    def tokens(self) -> TokenPair | None:
        return self.grant.tokens


def grants_for(spec: CampaignSpec, creds: Credentials) -> dict[tuple[str, str], EndpointGrant]:
    """What a transfer to each endpoint would carry (``Credentials.grant``: its token, or
    why its tier would pause or the file be refused), for a probe file under it; read
    here, in one thread (``Credentials`` is not shared between threads)."""
    out = {}
    for t in by_priority(spec.destinations):
        for ep in t.pool:
            dst = names.join_url(ep, f".gridxfer-probe-{os.urandom(4).hex()}", check=False)
            g = creds.grant(t.name, ep, "file:///probe", dst, len(PROBE_DATA))
            out[(t.name, ep)] = EndpointGrant(dst, g, _may_delete(t.token_for(ep), g, dst))
    return out


def _may_delete(ts: TokenSpec | None, grant: Grant, dst: str) -> bool:
    """Whether the destination's token (one given for this storage, with storage scopes)
    allows deleting ``dst``: a token that may create but not modify (an upload token) would
    leave the probe file behind, so none is written."""
    value = grant.tokens.dst if grant.tokens is not None else None
    if value is None or ts is None:
        return True
    try:
        check(parse(value), "modify", url_path(dst), base=ts.base)
    except TokenError:
        return False
    return True


def existing(urls: list[tuple[str, TokenPair | None]], ops_factory: Callable
             ) -> tuple[str, ...]:
    """Those of ``urls`` (each with its endpoint's tokens) already at the destination: with
    overwrite off, a run fails them (class exists, never retried). Only the pairs shown
    are asked: one stat each."""
    def there(url: str, tokens: TokenPair | None) -> bool:
        stat = capabilities_of(ops_factory(url)).stat
        if stat is None:
            return False
        try:
            with movers_tokens.using(tokens, "", url):
                stat(url)
            return True
        except (GridxferError, OSError):
            return False
    answers = _in_parallel([functools.partial(there, u, tokens) for u, tokens in urls])
    return tuple(url for (url, _), yes in zip(urls, answers, strict=True) if yes)


def _in_parallel(calls: list[Callable[[], R]]) -> list[R | None]:
    """Each call's answer, the calls in ``gridxfer-probe-N`` threads (16 at most at once);
    None for one with no answer within ``PROBE_TIMEOUT`` (its thread is abandoned)."""
    if not calls:
        return []
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(16, len(calls)),
                                                 thread_name_prefix="gridxfer-probe")
    futures = [pool.submit(call) for call in calls]
    out: list[R | None] = []
    for fut in futures:
        try:
            out.append(fut.result(timeout=PROBE_TIMEOUT))
        except concurrent.futures.TimeoutError:
            out.append(None)
    pool.shutdown(wait=False, cancel_futures=True)
    return out


def probe_all(spec: CampaignSpec, size: int, ops_factory: Callable, mover_factory: Callable,
              creds: Credentials, grants: dict[tuple[str, str], EndpointGrant]
              ) -> tuple[Probe, ...]:
    """Every endpoint probed once, in parallel; ``grants``: ``grants_for``'s."""
    source = EndpointGrant("", Grant(creds.source_token()))       # the listing's token
    jobs: list[tuple[str, str, int | None, EndpointGrant]] = [
        ("source", spec.source.url, None, source)]
    jobs += [(t.name, ep, size // len(t.pool), grants[(t.name, ep)])
             for t in by_priority(spec.destinations) for ep in t.pool]
    answers = _in_parallel([functools.partial(_probe, role, url, share, ops_factory,
                                              mover_factory, g)
                            for role, url, share, g in jobs])
    return tuple(p if p is not None else
                 Probe(role, url, False, None, problem=f"no answer within {PROBE_TIMEOUT:g}s")
                 for (role, url, _, _), p in zip(jobs, answers, strict=True))


def _probe(role: str, url: str, share: int | None, ops_factory: Callable,
           mover_factory: Callable, g: EndpointGrant) -> Probe:
    """One endpoint, its requests carrying the token a run's would (the source's for the
    source, the endpoint's for a destination); one whose tier a run would pause, or whose
    files it would refuse, for want of a token is flagged without being contacted."""
    why = g.grant.pause or g.grant.refuse
    if why:
        return Probe(role, url, None, None if role == "source" else False, problem=why)
    with movers_tokens.using(g.grant.tokens, url if role == "source" else "",
                             "" if role == "source" else url):
        return _probe_one(role, url, share, ops_factory, mover_factory, g)


def _probe_one(role: str, url: str, share: int | None, ops_factory: Callable,
               mover_factory: Callable, g: EndpointGrant) -> Probe:
    try:
        caps = capabilities_of(ops_factory(url))
    except GridxferError as exc:
        return Probe(role, url, None, problem=_why(exc))
    reachable: bool | None = None
    if caps.stat is not None:
        try:
            caps.stat(url)
            reachable = True
        except TransferError as exc:
            if exc.error_class is not ErrorClass.SOURCE_MISSING:
                return Probe(role, url, False, problem=_why(exc))
            if role == "source":
                return Probe(role, url, True, problem=f"no such directory: {_why(exc)}")
            reachable = True            # a missing destination directory: a run creates it
        except (GridxferError, OSError) as exc:
            return Probe(role, url, False, problem=_why(exc))
    if role == "source":
        return Probe(role, url, reachable)
    writable, problem = _write(g, mover_factory, caps.unlink)
    free = query_free(url)      # as a run's exclusions ask it (root://: the nearest directory)
    if not problem and free is not None and share is not None and free < share:
        problem = (f"{free} bytes free, below its share of the tier ({share} bytes); "
                   f"a run excludes it once it is full")
    return Probe(role, url, reachable if reachable is not None else writable, writable,
                 free, problem)


def _write(g: EndpointGrant, mover_factory: Callable, unlink: Callable[[str], None] | None
           ) -> tuple[bool | None, str]:
    """Write and delete the probe file ``g.probe_url`` as a transfer would, with its tokens:
    (writable, why not)."""
    dst = g.probe_url
    if not g.deletes:
        return None, ""             # it could not be deleted again: not tried
    fd, local = tempfile.mkstemp(prefix="gridxfer-probe-")
    try:
        os.write(fd, PROBE_DATA)
        os.close(fd)
        src = f"file://{local}"
        try:
            mover = mover_factory(src, dst, False)
        except GridxferError:
            return None, ""                         # no route to write from here: not tried
        mover.copy(src, dst, params=TransferParams(timeout=PROBE_TIMEOUT, tokens=g.grant.tokens,
                                                   overwrite=True))
        if unlink is not None:
            unlink(dst)
        return True, ""
    except TransferError as exc:
        return False, f"not writable: {_why(exc)}"
    except (GridxferError, OSError) as exc:
        return False, f"not writable: {_why(exc)}"
    finally:
        os.unlink(local)


def _why(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return redact(text if len(text) <= 160 else text[:157] + "...")
