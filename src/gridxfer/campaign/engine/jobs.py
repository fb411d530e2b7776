"""The scheduler's work items: a dispatched attempt (``Job``), what a worker hands back
(``Result``), a file waiting for its retry (``Retry``) and the end result of a run."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from gridxfer.errors import ErrorClass
from gridxfer.movers.base import CancelFlag, TokenPair, TransferOutcome
from gridxfer.campaign.accounting.stats import Flight, StatsSnapshot


@dataclass
class Job:
    attempt_id: int
    file_id: int
    tier: str
    name: str
    src_url: str
    dst_url: str
    endpoint: str
    size: int
    attempt_no: int
    expected: str | None
    avoid: frozenset
    started: float
    flight: Flight
    tmp_url: str | None = None                   # journalled temporary name (the mover's)
    cancel: CancelFlag = field(default_factory=CancelFlag)
    timed_out: bool = False
    thread: threading.Thread | None = None       # the worker running it
    running: bool = False                        # past the link's gate, in the mover
    slot: str | None = None                      # what it holds: "gate" | "verifying" | None
    bundle: list | None = None                   # the jobs handed to one worker with it
    tokens: TokenPair | None = field(default=None, repr=False)   # engine/credentials
    refusal: str | None = None                   # a token scope is missing: fails as auth


@dataclass(frozen=True)
class Result:
    job: Job
    outcome: TransferOutcome | None
    error_class: ErrorClass | None
    message: str
    ended: float
    requeue: bool = False       # never started; back to the queue, not counted as an attempt


@dataclass(frozen=True)
class SchedulerResult:
    state: str                      # done | partial | interrupted
    files_done: int
    files_failed: int
    seconds: float
    snapshot: StatsSnapshot


@dataclass(order=True)
class Retry:
    not_before: float
    file_id: int
    row: tuple = field(compare=False)
