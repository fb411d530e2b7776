"""iperf3 as a monitoring source: one client run (``iperf3 -J -c HOST``) per series.

The iperf3 executable is run and its report read by ``netbench.iperf.read_tcp``, the one
iperf3 parser of the project. The PyPI ``iperf3`` bindings were tried for this client and
dropped (why: ``netbench/iperf.py``'s docstring; in short, a report over 64 KiB hangs
them and -t cannot interrupt them).

This source fits the seam with one difference, which is why: it measures, it cannot read
the past. ``series(window)`` runs a test of ``window.seconds`` now; the series' window is
the run's own (from iperf3's start time), its samples are the run's report intervals, and
its ``totals`` are iperf3's end-of-run sums, which the link check judges (they are not
the sum of the intervals: iperf3 leaves out the tail and counts the receiver's side).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import time
from dataclasses import dataclass

from gridxfer.errors import GridxferError
from gridxfer.monitoring.series import Point, Series, Window
from gridxfer.netbench.iperf import NetbenchError, TcpReport, read_tcp


class IperfError(GridxferError):
    """iperf3 could not measure (not runnable, bad output, or :class:`IperfUnreachable`)."""


class IperfUnreachable(IperfError):
    """iperf3 ran and reported why it could not test: no server, connection refused, host
    name not resolved, server busy (its report's ``error``). The link is what failed, not
    the check."""


def hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True)
class IperfSource:
    host: str
    port: int = 5201
    streams: int = 1
    reverse: bool = False
    connect_timeout: float = 3.0
    timeout: float = 30.0           # for the whole run (the check's -t budget)
    iperf3: str = "iperf3"
    kind: str = "iperf"

    @property
    def server(self) -> str:
        """``host:port``, an IPv6 address in brackets (``[::1]:5201``)."""
        return hostport(self.host, self.port)

    def series(self, window: Window) -> Series[Point]:
        report = self.run(window.seconds)
        unit = self.server
        direction = "from" if self.reverse else "to"
        started = report.started or time.time() - report.seconds
        samples = tuple(Point(time=started + iv.end, start=started + iv.start, value=iv.bytes,
                              labels={"unit": unit, "direction": direction})
                        for iv in report.intervals)
        totals = {"received_bps": report.received_bps, "sent_bps": report.sent_bps,
                  "seconds": report.seconds, "streams": float(self.streams)}
        if report.retransmits is not None:
            totals["retransmits"] = float(report.retransmits)
        return Series(Window(started + report.seconds, report.seconds), samples,
                      totals=totals)

    def run(self, duration: float) -> TcpReport:
        exe = shutil.which(self.iperf3)
        if exe is None:
            raise IperfError(f"{self.iperf3} not found")
        argv = [exe, "-J", "-c", self.host, "-p", str(self.port), "-t", f"{duration:g}",
                "-P", str(self.streams),
                "--connect-timeout", str(int(self.connect_timeout * 1000))]
        if self.reverse:
            argv.append("-R")
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout,
                              stdin=subprocess.DEVNULL)
        try:
            doc = json.loads(proc.stdout)
        except json.JSONDecodeError:
            detail = (proc.stderr or proc.stdout).strip().splitlines()
            raise IperfError(f"iperf3 to {self.server} failed: "
                             f"{detail[-1] if detail else f'exit {proc.returncode}'}") from None
        if isinstance(doc, dict) and doc.get("error"):
            raise IperfUnreachable(f"iperf3 to {self.server}: {doc['error']}")
        try:
            return read_tcp(doc, duration, what=f"to {self.host}")
        except NetbenchError as exc:
            raise IperfError(str(exc)) from None
