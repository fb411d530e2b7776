"""Sessions opened ahead: a campaign asks for a session to each of its servers before it
lists the source and builds its journal, so the first copies do not wait for the login.

A new XRootD session costs round trips before the first request: TCP, the handshake and
``kXR_protocol``, ``kXR_login``, then the authentication (GSI: several more). Over a 20 ms
link that is 60-80 ms during which every slot's first copy waits; over a transatlantic link
half a second. Listing the source, writing the plan and starting the dispatcher take about
as long, so the login now happens while they run (docs/performance-notes.md, "sessions
opened ahead", has the measured gain).

Servers reached with a campaign token of their own (a ``token:`` on the source, the tier or
the pool entry) are not connected ahead: XRootD's ztn login reads the login token the
mover writes at its first copy (``movers.xrootd.authz.login_token``); a login before that
would carry none. A mover without ``connect`` (``capabilities_of``) is skipped, and a
failure is the first copy's to report: nothing here can fail a campaign.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from gridxfer.campaign.spec.schema import CampaignSpec
from gridxfer.movers.capabilities import capabilities_of
from gridxfer.movers.urls import scheme_of, server_of

log = logging.getLogger(__name__)


def targets(spec: CampaignSpec) -> list[str]:
    """One URL per server the campaign reads or writes without a token of its own, in the
    order they are first used (the source, then the tiers' pools)."""
    urls: list[str] = [] if spec.source.token is not None else [spec.source.url]
    urls += [u for t in spec.destinations for u in t.pool if t.token_for(u) is None]
    seen: dict[str, str] = {}
    for url in urls:
        if scheme_of(url) != "file":             # a local path has no server
            seen.setdefault(server_of(url), url)
    return list(seen.values())


def connect_ahead(spec: CampaignSpec, ops_for: Callable[[str], object]) -> list[str]:
    """Ask each of ``targets(spec)``'s movers to connect; the URLs it was asked for."""
    asked = []
    for url in targets(spec):
        try:
            connect = capabilities_of(ops_for(url)).connect
            if connect is not None:
                connect(url)
                asked.append(url)
        except Exception as exc:  # noqa: BLE001 - best effort: the first copy reports
            log.debug("no session ahead to %s: %s", server_of(url), exc)
    if asked:
        log.debug("sessions opened ahead: %s", ", ".join(server_of(u) for u in asked))
    return asked
