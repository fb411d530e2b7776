"""iperf3 runs between two testbed hosts, and the one parser of iperf3's JSON report.

The server is started in the receiving host's namespace and bound to its address; the
client runs in the sending host's namespace. A host without a namespace (``netns=None``)
runs on this machine (loopback grid). :func:`parse_tcp` and :func:`parse_udp` read
``iperf3 -J`` reports for ``netbench`` and for ``check_gridxfer_link``
(``monitoring/sources/iperf.py``): there is no other iperf3 parser.

The iperf3 *executable* is run, not the PyPI ``iperf3`` bindings (ctypes on libiperf),
which were declared and never imported, and are dropped. Tried with Debian 12's libiperf
3.12 (iperf3-python 0.1.11): a run works, but the bindings redirect fd 1 into a pipe that
nobody reads while ``iperf_run_client`` runs, so a report over the 64 KiB pipe buffer
blocks the run for ever (-P 24 -t 5 on loopback hung; -P 16 passed; one stream reaches it
after about 90 s); SIGALRM (the checks' -t) cannot interrupt the blocked C call; and they
expose neither ``--connect-timeout`` nor ``--get-server-output`` nor fractional durations.
A child process has none of these problems and is killed by its timeout.
"""
from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

from gridxfer.errors import GridxferError
from gridxfer.testbed.netns import wrap
from gridxfer.testbed.procs import stop_popen

DEFAULT_PORT = 5201


class NetbenchError(GridxferError):
    """iperf3 could not run or returned no result."""


@dataclass(frozen=True)
class BenchHost:
    name: str
    address: str
    netns: str | None = None

    def argv(self, argv: list[str]) -> list[str]:
        return [*wrap(self.netns), *argv] if self.netns else argv


@dataclass(frozen=True)
class TcpRun:
    bits_per_second: float          # receiver side, all streams
    sent_bps: float
    retransmits: int
    seconds: float
    streams: int
    intervals_bps: tuple[float, ...]  # receiver side, per 1 s interval, all streams summed


@dataclass(frozen=True)
class Interval:
    """One report interval, all streams summed; ``start``/``end`` are seconds into the run."""
    start: float
    end: float
    bytes: float
    bits_per_second: float


@dataclass(frozen=True)
class TcpReport:
    """What an ``iperf3 -J`` TCP report says (:class:`TcpRun` is netbench's view of it)."""
    received_bps: float
    sent_bps: float
    retransmits: int | None         # None: the sender reported none (not Linux)
    seconds: float
    started: float                  # unix time the test started (iperf3's timesecs)
    intervals: tuple[Interval, ...]  # receiver side when the server's output is in it


@dataclass(frozen=True)
class UdpRun:
    packets: int                    # datagrams sent
    lost: int                       # datagrams lost
    loss_fraction: float
    jitter_ms: float
    bits_per_second: float
    seconds: float


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def server(host: BenchHost, port: int | None = None) -> Iterator[int]:
    """An iperf3 server on ``host`` for the duration of the block; yields its port."""
    port = port or (DEFAULT_PORT if host.netns else _free_port())
    argv = host.argv(["iperf3", "-s", "-J", "-B", host.address, "-p", str(port)])
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=True)
    except FileNotFoundError:
        raise NetbenchError("iperf3 not found (apt-get install iperf3)") from None
    try:
        _wait_listening(host, port, proc)
        yield port
    finally:
        stop_popen(proc)
        if proc.stderr:
            proc.stderr.close()


def _wait_listening(host: BenchHost, port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
            raise NetbenchError(f"iperf3 server on {host.name} exited: {err or proc.returncode}")
        out = subprocess.run(host.argv(["ss", "-Hltn", f"sport = :{port}"]),
                             capture_output=True, text=True).stdout
        if out.strip():
            return
        time.sleep(0.05)
    raise NetbenchError(f"iperf3 server on {host.name}:{port} did not start listening")


def _client(src: BenchHost, dst: BenchHost, port: int, extra: list[str], duration: float) -> dict:
    argv = src.argv(["iperf3", "-c", dst.address, "-p", str(port), "-B", src.address, "-J",
                     "-t", f"{duration:g}", *extra])
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 60)
    except subprocess.TimeoutExpired:
        raise NetbenchError(f"iperf3 {src.name} -> {dst.name} timed out") from None
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        raise NetbenchError(f"iperf3 {src.name} -> {dst.name}: no JSON output "
                            f"({(proc.stderr or proc.stdout).strip()[:200]})") from None
    if doc.get("error"):
        raise NetbenchError(f"iperf3 {src.name} -> {dst.name}: {doc['error']}")
    return doc


def tcp_once(src: BenchHost, dst: BenchHost, port: int, *, streams: int = 1,
             duration: float = 10.0, omit: float = 0.0, window: int | None = None,
             congestion: str | None = None) -> TcpRun:
    extra = ["-P", str(streams), "--get-server-output"]
    if omit:
        extra += ["-O", f"{omit:g}"]
    if window:
        extra += ["-w", str(window)]
    if congestion:
        extra += ["-C", congestion]
    return parse_tcp(_client(src, dst, port, extra, duration), streams, duration,
                     what=f"{src.name} -> {dst.name}")


def read_tcp(doc: object, duration: float, what: str = "") -> TcpReport:
    """The report of one TCP run; NetbenchError naming ``what`` for an error report or one
    without a TCP summary."""
    if not isinstance(doc, dict):
        raise NetbenchError("iperf3 report is not a JSON object")
    if doc.get("error"):
        raise NetbenchError(f"iperf3 {what}: {doc['error']}")
    end = doc.get("end") or {}
    recv, sent = end.get("sum_received") or {}, end.get("sum_sent") or {}
    if "bits_per_second" not in recv:
        raise NetbenchError(f"iperf3 {what}: no TCP summary in the report")
    # receiver-side intervals (the client's count bytes written into its socket buffer);
    # the short tail interval at the end of a run is left out
    server = doc.get("server_output_json") or doc
    kept = [iv["sum"] for iv in server.get("intervals", [])
            if not iv["sum"].get("omitted") and iv["sum"].get("seconds", 1) >= 0.5]
    retransmits = sent.get("retransmits")
    stamp = (doc.get("start") or {}).get("timestamp") or {}
    return TcpReport(received_bps=float(recv["bits_per_second"]),
                     sent_bps=float(sent.get("bits_per_second", 0.0)),
                     retransmits=None if retransmits is None else int(retransmits),
                     seconds=float(recv.get("seconds", duration)),
                     started=float(stamp.get("timesecs", 0.0)),
                     intervals=tuple(Interval(float(iv.get("start", 0.0)),
                                              float(iv.get("end", 0.0)),
                                              float(iv.get("bytes", 0.0)),
                                              float(iv["bits_per_second"])) for iv in kept))


def parse_tcp(doc: object, streams: int, duration: float, what: str = "") -> TcpRun:
    """A TcpRun from ``iperf3 -J --get-server-output`` output."""
    r = read_tcp(doc, duration, what)
    return TcpRun(bits_per_second=r.received_bps, sent_bps=r.sent_bps,
                  retransmits=r.retransmits or 0, seconds=r.seconds, streams=streams,
                  intervals_bps=tuple(iv.bits_per_second for iv in r.intervals))


def udp_once(src: BenchHost, dst: BenchHost, port: int, *, rate_bps: float,
             duration: float = 10.0, length: int = 1400, buffer: int | None = 2 * 2**20) -> UdpRun:
    """``buffer`` sets SO_RCVBUF/SO_SNDBUF on both ends (iperf3 -w; capped by the global
    net.core.rmem_max): a receiver descheduled for a few ms must not drop datagrams that
    the link delivered, or the loss measured is not the link's."""
    extra = ["-u", "-b", str(int(rate_bps)), "-l", str(length)]
    if buffer:
        extra += ["-w", str(buffer)]
    for attempt in range(1, SETUP_ATTEMPTS + 1):
        try:
            doc = _client(src, dst, port, extra, duration)
            break
        except NetbenchError as exc:
            if not lost_setup(str(exc)) or attempt == SETUP_ATTEMPTS:
                raise
    return parse_udp(doc, duration, what=f"{src.name} -> {dst.name}")


SETUP_ATTEMPTS = 4
_SETUP_LOST = "unable to read from stream socket"


def lost_setup(error: str) -> bool:
    """Whether iperf3 failed in UDP stream set-up, before measuring anything.

    The client sends one datagram and waits for one back; iperf3 has no retransmission for
    that handshake (esnet/iperf#862), so on a link with configured loss it fails now and
    then with this error. That is a lost set-up packet, not a result: try again."""
    return _SETUP_LOST in error


def parse_udp(doc: dict, duration: float, what: str = "") -> UdpRun:
    """A UdpRun from ``iperf3 -u -J`` output (the receiver's counts)."""
    s = doc["end"]["sum"]
    packets, lost = int(s.get("packets", 0)), int(s.get("lost_packets", 0))
    if packets <= 0:
        raise NetbenchError(f"iperf3 UDP {what}: no datagrams counted")
    return UdpRun(packets=packets, lost=lost, loss_fraction=lost / packets,
                  jitter_ms=float(s.get("jitter_ms", 0.0)),
                  bits_per_second=float(s.get("bits_per_second", 0.0)),
                  seconds=float(s.get("seconds", duration)))
