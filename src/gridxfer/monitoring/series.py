"""The MonitoringSource seam: every source answers ``series(window) -> Series``.

A :class:`Series` is plain data (frozen): the samples a source saw for a window, each with
a time, a value and labels, and what the reading itself noticed (unparsable lines per
format, rotations it could not follow, figures the source reports for the whole window).
Sources judge nothing; the checks aggregate a series and compare the figures with their
thresholds. One contract suite (``tests/contract/test_monitoring_sources.py``) runs
against every source: the campaign journal, CTA, dCache, JSON lines and iperf3.

A sample covers ``[start, time]`` (``start == time`` for an instant, such as a drive put
down) and ``value`` is the bytes moved in it. ``labels["unit"]`` names what moved them:
the destination endpoint (journal), the tape drive (CTA, JSON lines), the pool (dCache)
or ``host:port`` (iperf3). The tape samples are :class:`~.sources.tapelog.TapeSession`,
which carry more typed fields (kills, failures, per-file records) that the tape aggregate
needs; the others are :class:`Point`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Generic, Protocol, TypeVar


@dataclass(frozen=True)
class Window:
    """``[end - seconds, end]``, unix seconds."""

    end: float
    seconds: float

    @property
    def start(self) -> float:
        return self.end - self.seconds


class Sample(Protocol):
    @property
    def time(self) -> float: ...           # unix seconds the sample ends

    @property
    def start(self) -> float: ...          # unix seconds it starts (<= time)

    @property
    def value(self) -> float: ...          # bytes moved over [start, time]

    @property
    def labels(self) -> Mapping[str, str]: ...


@dataclass(frozen=True)
class Point:
    """A plain sample (journal attempts, iperf3 intervals)."""

    time: float
    start: float
    value: float
    labels: Mapping[str, str] = field(default_factory=dict, hash=False)


S = TypeVar("S", bound=Sample, covariant=True)


@dataclass(frozen=True)
class Series(Generic[S]):
    """What one source saw for a window.

    ``samples`` are in time order. A log source also returns the samples it keeps around
    the window (a session that ends after it, a kill logged before it): the aggregate needs
    them; :meth:`inside` gives those that end in the window.
    """

    window: Window
    samples: tuple[S, ...]
    unparsable: Mapping[str, int] = field(default_factory=dict, hash=False)  # format -> lines
    notes: tuple[str, ...] = ()       # what the reading could not follow (lost rotations)
    totals: Mapping[str, float] = field(default_factory=dict, hash=False)   # source's own sums
    inputs: int = 1                   # files or journals read

    @property
    def unparsable_total(self) -> int:
        return sum(self.unparsable.values())

    def inside(self) -> tuple[S, ...]:
        w = self.window
        return tuple(s for s in self.samples if s.start < w.end and s.time > w.start
                     or w.start <= s.time <= w.end)

    @property
    def idle(self) -> bool:
        """No sample in the window (a check may define idle more narrowly: the tape check
        counts only write sessions above --min-volume)."""
        return not self.inside()


class MonitoringSource(Protocol[S]):
    kind: str                          # journal | cta | dcache | jsonl | iperf

    def series(self, window: Window) -> Series[S]: ...
