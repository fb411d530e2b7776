"""Default factories for the scheduler's extension points (one concept: what plugs in).

``selector_factory(name) -> DestinationSelector`` (one per tier),
``exclusion_factory() -> ExclusionPolicy`` (one per campaign; the default one is
``default_exclusion_factory(spec)``, with the campaign's cooldowns),
``optimizer_factory(TierSpec) -> ConcurrencyOptimizer`` (one per tier),
``mover_factory(src, dst, third_party) -> Mover`` (cached per worker thread: ``ThreadMovers``),
``ops_factory(url) -> Mover`` (stat/checksum/unlink/space for one URL).
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from gridxfer.campaign.policy import exclusions as exclusions_mod
from gridxfer.campaign.policy import optimizer as optimizer_mod
from gridxfer.campaign.policy import selection
from gridxfer.campaign.spec.schema import CampaignSpec, TierSpec
from gridxfer.movers.base import Mover
from gridxfer.movers.capabilities import capabilities_of
from gridxfer.movers.urls import server_of
import contextlib

MoverFactory = Callable[[str, str, bool], Mover]
# stat / checksum / unlink / space for one URL: a Mover, or any object with those methods
# (what it has is asked with ``capabilities_of``)
OpsFactory = Callable[[str], object]


def default_mover_factory(src: str, dst: str, third_party: bool) -> Mover:
    """The mover for a pair; with ``third_party``, TPC where both ends allow it (the
    registry's ``tpc_pairs``) and the streaming mover otherwise (a mixed campaign)."""
    from gridxfer.movers.registry import get_mover, tpc_possible
    return get_mover(src, dst, third_party=third_party and tpc_possible(src, dst))


def default_ops_factory(url: str) -> Mover:
    """The mover answering stat/checksum/unlink/space for one URL."""
    from gridxfer.movers.registry import mover_for
    return mover_for(url)


def tape_factory_for(ops_for: OpsFactory) -> Callable[[str], object | None]:
    """The bulk tape operations (``movers.tape.TapeOps``) of the storage behind a URL:
    ``capabilities_of(ops).tape``, or None where its protocol cannot ask. One ops object
    per endpoint, kept (called from the one tape poller thread)."""
    cache: dict[str, object | None] = {}

    def tape_for(url: str) -> object | None:
        key = server_of(url)
        if key not in cache:
            try:
                ops = ops_for(url)
            except Exception:  # noqa: BLE001 - no mover for it: it cannot ask
                return None
            cache[key] = capabilities_of(ops).tape
        return cache[key]
    return tape_for


def ops_factory_for(mover_factory: MoverFactory | None,
                    ops_factory: OpsFactory | None) -> OpsFactory:
    """Metadata operations: the registry's, unless a custom copy mover was given (tests)."""
    if ops_factory is not None:
        return ops_factory
    if mover_factory is None:
        return lambda url: default_ops_factory(url)
    return lambda url: mover_factory(url, url, False)


def default_selector_factory(name: str) -> selection.DestinationSelector:
    return selection.make_selector(name)


def default_exclusion_factory(spec: CampaignSpec | None = None) -> selection.ExclusionPolicy:
    """The default policy, with the campaign's ``circuit_breaker`` cooldowns."""
    if spec is None:
        return exclusions_mod.DefaultExclusions()
    cb = spec.circuit_breaker
    from gridxfer.campaign.engine.credentials import Credentials, configured
    tokens = Credentials(spec).by_host if configured(spec) else None    # space queries
    return exclusions_mod.DefaultExclusions(cooldown=cb.cooldown, max_cooldown=cb.max_cooldown,
                                            tokens=tokens)


def default_optimizer_factory(tier: TierSpec) -> optimizer_mod.ConcurrencyOptimizer:
    # under a default ceiling (engine/ceilings.py) start at a quarter of it, at least
    # START_MAX: small files (ceiling 128) start at 32, bulk at 8
    start = max(optimizer_mod.START_MAX, tier.max_active // 4) if tier.auto_ceiling else None
    return optimizer_mod.make_optimizer(optimizer_mod.DEFAULT_OPTIMIZER, tier.min_active,
                                        tier.max_active, start=start)


def fixed_optimizer_factory(tier: TierSpec) -> optimizer_mod.ConcurrencyOptimizer:
    return optimizer_mod.FixedConcurrency(tier.min_active, tier.max_active)


def default_selector_name() -> str:
    return getattr(selection, "DEFAULT_SELECTOR", "round-robin")


class ThreadMovers:
    """Each worker thread's movers, one per (source scheme, destination scheme): a mover
    keeps its sessions (GSI, XRootD) between files, and sessions stay with their thread."""

    def __init__(self, factory: MoverFactory, third_party: bool) -> None:
        self._factory, self._third_party = factory, third_party
        self._local = threading.local()

    def __call__(self, src: str, dst: str) -> Mover:
        cache: dict[tuple[str, str], Mover] | None = getattr(self._local, "movers", None)
        if cache is None:
            cache = self._local.movers = {}
        key = (src.split(":", 1)[0], dst.split(":", 1)[0])
        if key not in cache:
            cache[key] = self._factory(src, dst, self._third_party)
        return cache[key]

    def warm(self, src: str, endpoints: Iterable[str]) -> None:
        """Open this thread's sessions to the endpoints before it takes a job (a GSI
        handshake per thread and server, otherwise paid inside a transfer)."""
        for ep in endpoints:
            stat = capabilities_of(self(src, ep)).stat
            if stat is not None:
                with contextlib.suppress(Exception):
                    stat(ep)


def close_plugins(plugins: Iterable[object]) -> None:
    """Close each plug-in that has a ``close()`` (its own thread or file: a selector, the
    exclusion policy, an optimizer); one that fails to close does not stop the others."""
    for obj in plugins:
        close = getattr(obj, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):
                close()
