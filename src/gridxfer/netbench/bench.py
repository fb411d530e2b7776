"""The netbench measurements: TCP throughput distributions, UDP loss, RTT, host matrix.

Hosts are names from the running netns testbed (``gridxfer testbed up``). Each function
returns a frozen result; the CLI renders it as text or ``--json``.
"""
from __future__ import annotations

import itertools
import re
import statistics
import subprocess
from dataclasses import dataclass, field
from typing import Any

from gridxfer.errors import UsageError
from gridxfer.testbed import netgrid
from gridxfer.netbench import iperf, stats
from gridxfer.netbench.iperf import BenchHost, NetbenchError, TcpRun, UdpRun


@dataclass(frozen=True)
class PathInfo:
    """The emulated link between two hosts' tiers (None fields: no emulation)."""
    rtt_s: float | None
    rate_bps: float | None
    loss: float | None


@dataclass(frozen=True)
class TcpResult:
    src: str
    dst: str
    streams: int
    duration: float
    repeat: int
    path: PathInfo
    runs: tuple[TcpRun, ...]
    summary: stats.Summary                 # over the runs' receiver throughput (bit/s)
    interval_summary: stats.Summary        # over every 1 s interval of every run
    histogram: tuple[stats.Bin, ...]       # over the samples named by ``histogram_of``
    histogram_of: str                      # "intervals" | "runs"


@dataclass(frozen=True)
class UdpResult:
    src: str
    dst: str
    rate_bps: float
    duration: float
    length: int
    path: PathInfo
    run: UdpRun


@dataclass(frozen=True)
class RttResult:
    src: str
    dst: str
    count: int
    path: PathInfo
    min_ms: float
    avg_ms: float
    max_ms: float
    mdev_ms: float
    loss_fraction: float
    median_ms: float = 0.0          # robust against a few replies delayed by CPU contention


@dataclass(frozen=True)
class MatrixResult:
    streams: int
    duration: float
    hosts: tuple[str, ...]
    cells: tuple[TcpResult, ...] = field(default_factory=tuple)

    def rate(self, src: str, dst: str) -> float | None:
        for c in self.cells:
            if (c.src, c.dst) == (src, dst):
                return c.summary.avg
        return None


def resolve(name: str) -> BenchHost:
    """A testbed host by name; ``local`` is this machine where the topology has a controller."""
    hosts = netgrid.hosts(with_local=True)
    if name not in hosts:
        raise UsageError(f"unknown host {name!r} (testbed hosts: {', '.join(sorted(hosts))})")
    h = hosts[name]
    return BenchHost(h.name, h.address, h.netns or None)


def path_info(src: str, dst: str) -> PathInfo:
    hosts = netgrid.hosts(with_local=True)
    ta, tb = hosts[src].tier, hosts[dst].tier
    for link in netgrid.status().get("links", []):
        if (link["from"], link["to"]) == (ta, tb):
            return PathInfo(link["rtt_s"], link["rate_bps"], link["loss"])
    return PathInfo(None, None, None)


def _check_pair(src: str, dst: str) -> tuple[BenchHost, BenchHost]:
    if src == dst:
        raise UsageError("source and destination host must differ")
    return resolve(src), resolve(dst)


def tcp(src: str, dst: str, *, streams: int = 1, duration: float = 10.0, repeat: int = 1,
        omit: float = 0.0, histogram_of: str = "intervals",
        bin_width_bps: float | None = None) -> TcpResult:
    """``repeat`` iperf3 TCP runs of ``streams`` streams for ``duration`` seconds."""
    if streams < 1 or repeat < 1 or duration <= 0:
        raise UsageError("streams and repeat must be >= 1 and duration > 0")
    if histogram_of not in ("intervals", "runs"):
        raise UsageError("histogram must be of 'intervals' or 'runs'")
    a, b = _check_pair(src, dst)
    runs = []
    with iperf.server(b) as port:
        for _ in range(repeat):
            runs.append(iperf.tcp_once(a, b, port, streams=streams, duration=duration, omit=omit))
    return _tcp_result(src, dst, streams, duration, tuple(runs), path_info(src, dst),
                       histogram_of, bin_width_bps)


def _tcp_result(src: str, dst: str, streams: int, duration: float, runs: tuple[TcpRun, ...],
                path: PathInfo, histogram_of: str, bin_width_bps: float | None) -> TcpResult:
    per_run = [r.bits_per_second for r in runs]
    per_iv = [v for r in runs for v in r.intervals_bps]
    samples = per_iv if histogram_of == "intervals" else per_run
    return TcpResult(src, dst, streams, duration, len(runs), path, runs,
                     stats.summarize(per_run), stats.summarize(per_iv),
                     tuple(stats.histogram(samples, bin_width_bps)), histogram_of)


def udp(src: str, dst: str, *, rate_bps: float, duration: float = 10.0,
        length: int = 1400, buffer: int = 2 * 2**20) -> UdpResult:
    """One iperf3 UDP run at ``rate_bps``: datagrams sent, lost and the loss fraction."""
    if rate_bps <= 0 or duration <= 0 or not 64 <= length <= 65000:
        raise UsageError("rate and duration must be > 0, length within 64..65000")
    a, b = _check_pair(src, dst)
    with iperf.server(b) as port:
        run = iperf.udp_once(a, b, port, rate_bps=rate_bps, duration=duration, length=length,
                             buffer=buffer)
    return UdpResult(src, dst, rate_bps, duration, length, path_info(src, dst), run)


_PING_RE = re.compile(r"= ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms")
_LOSS_RE = re.compile(r"(\d+) packets transmitted, (\d+) received")
_TIME_RE = re.compile(r"time=([\d.]+) ms")


def rtt(src: str, dst: str, *, count: int = 10, interval: float = 0.2) -> RttResult:
    """Round-trip time with ``ping`` from ``src``'s namespace to ``dst``."""
    a, b = _check_pair(src, dst)
    proc = subprocess.run(a.argv(["ping", "-n", "-c", str(count), "-i", f"{interval:g}",
                                  "-W", "2", b.address]),
                          capture_output=True, text=True, timeout=count * interval + 30)
    m, lm = _PING_RE.search(proc.stdout), _LOSS_RE.search(proc.stdout)
    if not m or not lm:
        raise NetbenchError(f"ping {src} -> {dst} failed: {(proc.stderr or proc.stdout).strip()}")
    sent, got = int(lm.group(1)), int(lm.group(2))
    samples = [float(t) for t in _TIME_RE.findall(proc.stdout)]
    low, avg, high, mdev = (float(g) for g in m.groups())
    return RttResult(src, dst, count, path_info(src, dst), low, avg, high, mdev,
                     loss_fraction=(sent - got) / sent if sent else 1.0,
                     median_ms=statistics.median(samples) if samples else float(m.group(2)))


def matrix(hosts: list[str] | None = None, *, streams: int = 1,
           duration: float = 3.0) -> MatrixResult:
    """TCP throughput for every ordered pair of hosts (one run each)."""
    names = list(hosts) if hosts else sorted(netgrid.hosts())
    if len(names) < 2:
        raise UsageError("a matrix needs at least two hosts")
    for n in names:
        resolve(n)
    cells = [tcp(s, d, streams=streams, duration=duration)
             for s, d in itertools.permutations(names, 2)]
    return MatrixResult(streams, duration, tuple(names), tuple(cells))


def to_json(result: Any) -> Any:
    """A JSON-ready dict of any netbench result (dataclasses, recursively)."""
    import dataclasses
    return dataclasses.asdict(result)
