"""The official FTS3 client library (fts-rest's ``fts3.rest.client``), imported on first use.

Its import pulls in M2Crypto, distutils and pkg_resources: 0.2 s, measured on the 2-core
test machine (`import gridxfer.campaign.runner` 0.30-0.36 s with it at module level, 0.11 s
without), which every ``campaign run`` and ``resume`` paid at start-up even on the local
engine, where it is never used. Only the FTS3 engine's modules call these.
"""
from __future__ import annotations

import functools
from types import ModuleType


@functools.cache
def easy() -> ModuleType:
    """``fts3.rest.client.easy``: ``new_job``, ``new_transfer``, ``Context``, ``submit``..."""
    from fts3.rest.client import easy as module  # type: ignore[import-untyped]
    return module


@functools.cache
def errors() -> ModuleType:
    """``fts3.rest.client.exceptions``: ``NotFound``, ``ClientError``, ``ServerError``..."""
    from fts3.rest.client import exceptions as module  # type: ignore[import-untyped]
    return module
