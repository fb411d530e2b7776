"""One iperf3 client run (``iperf3 -J -c HOST``), parsed from its JSON report."""
from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass

from gridxfer.errors import GridxferError


class IperfError(GridxferError):
    """iperf3 could not measure (no server, refused, bad output)."""


@dataclass(frozen=True)
class IperfResult:
    host: str
    sent_bps: float          # bits per second
    received_bps: float
    retransmits: int | None
    seconds: float
    streams: int


def run_iperf3(host: str, *, port: int = 5201, duration: float = 5.0, streams: int = 1,
               reverse: bool = False, connect_timeout: float = 3.0, timeout: float = 30.0,
               iperf3: str = "iperf3") -> IperfResult:
    exe = shutil.which(iperf3)
    if exe is None:
        raise IperfError(f"{iperf3} not found")
    argv = [exe, "-J", "-c", host, "-p", str(port), "-t", f"{duration:g}", "-P", str(streams),
            "--connect-timeout", str(int(connect_timeout * 1000))]
    if reverse:
        argv.append("-R")
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise IperfError(f"iperf3 to {host}:{port} failed: "
                         f"{detail[-1] if detail else f'exit {proc.returncode}'}") from None
    return parse_report(host, report, streams)


def parse_report(host: str, report: object, streams: int = 1) -> IperfResult:
    if not isinstance(report, dict):
        raise IperfError("iperf3 report is not a JSON object")
    if report.get("error"):
        raise IperfError(f"iperf3 to {host}: {report['error']}")
    end = report.get("end") or {}
    sent, received = end.get("sum_sent") or {}, end.get("sum_received") or {}
    if "bits_per_second" not in received:
        raise IperfError(f"iperf3 to {host}: no TCP summary in the report")
    return IperfResult(host=host, sent_bps=float(sent.get("bits_per_second", 0.0)),
                       received_bps=float(received["bits_per_second"]),
                       retransmits=sent.get("retransmits"),
                       seconds=float(received.get("seconds", 0.0)), streams=streams)
