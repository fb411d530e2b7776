"""Overwrite off, checked beside the copy instead of before it.

A copy that writes a temporary name need not know whether its final name exists before the
first byte leaves: only before the rename. Over a WAN the separate existence query in front
of each copy (a HEAD on davs) is one round trip on the critical path of every file
(docs/performance-notes.md, "davs:// and the iperf3 ceiling"). ``DestinationCheck`` asks it
on the shared checksum threads while the copy starts; once the answer is "exists" the
copy's cancel flag turns on (a streamed copy or an HTTP-TPC then stops within one poll,
0.2 s), and ``settle()`` refuses the file as EXISTS before anything is renamed. The
temporary name is removed by the integrity path, as for any failure.

Only for copies to a temporary name: a copy written in place (``temp_url == dst``) must be
refused before it starts, and ``verified_copy`` keeps its query in front for those.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from gridxfer.errors import TransferError
from gridxfer.movers.base import Cancel, CancelFlag, TransferParams
from gridxfer.movers.integrity import background, destination_exists, exists
from gridxfer.movers.ops import Ops

if TYPE_CHECKING:
    from concurrent.futures import Future


class _Refusable(CancelFlag):
    """Set by the check (the destination exists) or by the transfer's own cancel flag."""

    __slots__ = ("_outer", "_check")

    def __init__(self, outer: Cancel | None, check: Future[bool]) -> None:
        super().__init__()
        self._outer = outer
        self._check = check

    def is_set(self) -> bool:
        if self._flag or (self._outer is not None and self._outer.is_set()):
            return True
        check = self._check
        if check.done() and check.exception() is None and check.result():
            self._flag = True
        return self._flag


class DestinationCheck:
    """``exists(ops, dst)`` running beside one copy (overwrite off)."""

    def __init__(self, ops: Ops, dst: str, params: TransferParams) -> None:
        self._ops, self._dst = ops, dst
        self._check: Future[bool] = background(exists, ops, dst)
        self.params = replace(params, cancel=_Refusable(params.cancel, self._check))

    def settle(self, *, quiet: bool = False) -> None:
        """Waits for the answer; EXISTS if the destination is there. A check that failed
        (the pool thread lacks this thread's tokens, say) is asked again here, whose error
        is raised, unless ``quiet`` (the copy failed: its error wins)."""
        try:
            found = self._check.result()
        except TransferError:
            if quiet:
                return
            found = exists(self._ops, self._dst)
        if found:
            raise destination_exists(self._dst)
