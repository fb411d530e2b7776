"""What ``campaign run --dry-run`` shows: the plan (the first source -> destination pairs in
dispatch order, files and bytes per tier, names gridxfer refuses) and one probe of every
endpoint, with those a run could not use flagged.

A destination probe asks the endpoint's own mover, once: ``stat`` of the pool directory
(reachable; a missing directory is fine, a run creates it), a 16-byte file written through
the campaign's integrity path under a hidden probe name and deleted again (writable; with
the tokens a transfer would get), and ``space`` where the protocol tells it (free bytes,
flagged when below the endpoint's even share of its tier's bytes). Probes run in parallel,
each bounded by ``PROBE_TIMEOUT``. The source was listed (or, for an explicit list, its
directory stat-ed): reachable.
"""
from __future__ import annotations

import concurrent.futures
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gridxfer.errors import ErrorClass, GridxferError, TransferError
from gridxfer.movers import names, tokens as movers_tokens
from gridxfer.movers.base import TransferParams
from gridxfer.movers.capabilities import capabilities_of
from gridxfer.redact import redact
from gridxfer.campaign.engine.credentials import Credentials
from gridxfer.campaign.engine.shares import ActivityShares
from gridxfer.campaign.engine.factories import (default_mover_factory, default_ops_factory,
                                                tape_factory_for)
from gridxfer.campaign.engine.tapeflow import _check_capable as check_tape
from gridxfer.campaign.spec.dataset import DatasetEntry, refusal
from gridxfer.campaign.spec.model import CampaignSpec, by_priority

PROBE_TIMEOUT = 30.0        # s: one endpoint's probe (stat, write, delete, space)
PAIRS = 10                  # pairs shown by default
PROBE_DATA = b"gridxfer probe\n\0"


@dataclass(frozen=True)
class Probe:
    role: str                   # "source", or the tier
    url: str
    reachable: bool | None      # None: not asked (an explicit list was not contacted)
    writable: bool | None = None    # None: not tried (the source)
    free: int | None = None     # bytes, where the protocol tells
    problem: str = ""           # why a run could not use it ("" = fine)


@dataclass(frozen=True)
class TierPlan:
    tier: str
    priority: int
    endpoints: int
    files: int
    bytes: int
    bad_names: int              # refused names: a run plans them failed (bad_name)
    activities: tuple[tuple[str, int], ...] = ()    # files per activity, with shares set


@dataclass(frozen=True)
class Plan:
    pairs: tuple[tuple[str, str, str], ...]     # (tier, source URL, destination URL)
    tiers: tuple[TierPlan, ...]
    probes: tuple[Probe, ...]
    existing: tuple[str, ...] = ()      # shown destinations already there (overwrite off)
    refused: tuple[tuple[str, str, str], ...] = ()  # the first (tier, name, why) refused

    @property
    def flagged(self) -> tuple[Probe, ...]:
        return tuple(p for p in self.probes if p.problem)

    @property
    def dead_tiers(self) -> tuple[str, ...]:
        """Tiers none of whose endpoints a run could use (their files would all fail)."""
        out = []
        for t in self.tiers:
            mine = [p for p in self.probes if p.role == t.tier]
            if mine and all(p.problem for p in mine):
                out.append(t.tier)
        return tuple(out)


def refuse_tape(spec: CampaignSpec, ops_factory: Callable | None = None) -> None:
    """`run` and `--dry-run` alike, before the source is listed: a tape-backed tier or a
    staged source whose protocol or server cannot say what is on tape (exit 2). Not for
    the FTS3 engine: FTS3 asks the tape, not this host."""
    if spec.engine.kind == "local":
        check_tape(spec, tape_factory_for(ops_factory or default_ops_factory))


def make_plan(spec: CampaignSpec, entries: Iterable[DatasetEntry], *, pairs: int = PAIRS,
              probe: bool = True, ops_factory: Callable | None = None,
              mover_factory: Callable | None = None) -> Plan:
    tiers = by_priority(spec.destinations)
    shares = ActivityShares(spec)
    per_activity: dict[str, int] = {}
    n = size = 0
    bad = dict.fromkeys((t.name for t in tiers), 0)
    refused: list[tuple[str, str, str]] = []
    first: list[DatasetEntry] = []
    for e in entries:
        n, size = n + 1, size + e.size
        for t in tiers:
            why = refusal(e, t.pool)
            if why is not None:
                bad[t.name] += 1
                if len(refused) < pairs:
                    refused.append((t.name, e.name, why))
        if shares.active:
            act = shares.of(e.name)
            per_activity[act] = per_activity.get(act, 0) + 1
        if len(first) < pairs:
            first.append(e)
    shown = tuple((t.name, e.src_url, names.join_url(t.pool[0], e.name, check=False))
                  for e in first for t in tiers)[:pairs]
    acts = tuple(sorted(per_activity.items()))
    plans = tuple(TierPlan(t.name, t.priority, len(t.pool), n, size, bad[t.name], acts)
                  for t in tiers)
    probes: tuple[Probe, ...] = ()
    if probe:
        probes = _probe_all(spec, size, ops_factory or default_ops_factory,
                            mover_factory or default_mover_factory)
    existing: tuple[str, ...] = ()
    if probe and not spec.overwrite:
        ok = {p.url for p in probes if not p.problem}
        existing = _existing([d for t, _, d in shown if spec.tier(t).pool[0] in ok],
                             ops_factory or default_ops_factory)
    return Plan(shown, plans, probes, existing, tuple(refused))


def _existing(urls: list[str], ops_factory: Callable) -> tuple[str, ...]:
    """Those of ``urls`` already at the destination: with overwrite off, a run fails them
    (class exists, never retried). Only the pairs shown are asked: one stat each."""
    def there(url: str) -> bool:
        stat = capabilities_of(ops_factory(url)).stat
        if stat is None:
            return False
        try:
            stat(url)
            return True
        except (GridxferError, OSError):
            return False
    if not urls:
        return ()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(16, len(urls)),
                                                 thread_name_prefix="gridxfer-probe")
    futures = [pool.submit(there, u) for u in urls]
    found = []
    for url, fut in zip(urls, futures, strict=True):
        try:
            if fut.result(timeout=PROBE_TIMEOUT):
                found.append(url)
        except (concurrent.futures.TimeoutError, GridxferError, OSError):
            pass
    pool.shutdown(wait=False, cancel_futures=True)
    return tuple(found)


def _probe_all(spec: CampaignSpec, size: int, ops_factory: Callable,
               mover_factory: Callable) -> tuple[Probe, ...]:
    jobs: list[tuple[str, str, int | None]] = [("source", spec.source.url, None)]
    jobs += [(t.name, ep, size // len(t.pool)) for t in by_priority(spec.destinations)
             for ep in t.pool]
    creds = Credentials(spec)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(16, len(jobs)),
                                                 thread_name_prefix="gridxfer-probe")
    futures = [pool.submit(_probe, spec, role, url, share, ops_factory, mover_factory, creds)
               for role, url, share in jobs]
    out = []
    for (role, url, _), fut in zip(jobs, futures, strict=True):
        try:
            out.append(fut.result(timeout=PROBE_TIMEOUT))
        except concurrent.futures.TimeoutError:
            out.append(Probe(role, url, False, None,
                             problem=f"no answer within {PROBE_TIMEOUT:g}s"))
    pool.shutdown(wait=False, cancel_futures=True)
    return tuple(out)


def _probe(spec: CampaignSpec, role: str, url: str, share: int | None, ops_factory: Callable,
           mover_factory: Callable, creds: Credentials) -> Probe:
    if role == "source":                # its requests carry the source's token, as a run's
        with movers_tokens.using(creds.source_token(), spec.source.url, ""):
            return _probe_one(spec, role, url, share, ops_factory, mover_factory, creds)
    return _probe_one(spec, role, url, share, ops_factory, mover_factory, creds)


def _probe_one(spec: CampaignSpec, role: str, url: str, share: int | None,
               ops_factory: Callable, mover_factory: Callable, creds: Credentials) -> Probe:
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
    writable, problem = _write(spec, role, url, mover_factory, creds, caps.unlink)
    free = None
    if caps.space is not None:
        try:
            free = caps.space(url)[0]
        except (GridxferError, OSError):
            free = None
    if not problem and free is not None and share is not None and free < share:
        problem = (f"{free} bytes free, below its share of the tier ({share} bytes); "
                   f"a run excludes it once it is full")
    return Probe(role, url, reachable if reachable is not None else writable, writable,
                 free, problem)


def _write(spec: CampaignSpec, tier: str, url: str, mover_factory: Callable,
           creds: Credentials, unlink: Callable[[str], None] | None) -> tuple[bool | None, str]:
    """Write and delete a probe file under ``url`` as a transfer would: (writable, why not)."""
    name = f".gridxfer-probe-{os.urandom(4).hex()}"
    dst = names.join_url(url, name, check=False)
    fd, local = tempfile.mkstemp(prefix="gridxfer-probe-")
    try:
        os.write(fd, PROBE_DATA)
        os.close(fd)
        src = f"file://{local}"
        grant = creds.grant(tier, url, src, dst, len(PROBE_DATA))
        if grant.pause or grant.refuse:
            return False, grant.pause or grant.refuse or ""
        try:
            mover = mover_factory(src, dst, False)
        except GridxferError:
            return None, ""                         # no route to write from here: not tried
        mover.copy(src, dst, params=TransferParams(timeout=PROBE_TIMEOUT, tokens=grant.tokens,
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
