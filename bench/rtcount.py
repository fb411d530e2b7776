"""Round trips and XRootD requests counted on a server's interface (bench.smallwan).

    ip netns exec NS python -m bench.rtcount --port 1094 [--iface eth0] --out FILE.json

Runs inside the destination host's network namespace and reads every packet of its
interface (an ``AF_PACKET`` socket: no tcpdump on this machine, and none is needed) until
SIGTERM or SIGINT, then writes what it saw as JSON:

* ``flights``: client -> server bursts, per TCP connection: a client segment with payload
  that follows a server segment with payload (or opens the connection) starts a new
  flight. A client that pipelines open, write and close sends one flight; one that waits
  for each reply sends three. With one transfer at a time, flights + ``connections`` (each
  SYN costs one round trip too) is the number of round trips the server saw.
* ``requests``: the client's XRootD requests by name, parsed from the reassembled byte
  stream (24-byte request header, ``dlen`` bytes of body; the 20-byte handshake skipped).
* ``connections``: SYNs from clients to ``port``.

It counts, it does not time: a loaded machine can slow a flight but not split or merge
the requests a client sends back to back before a reply (the reply needs a round trip of
the emulated link, 20 ms, while a client's burst leaves within microseconds).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ETH_P_ALL = 0x0003
HANDSHAKE_TAIL = struct.pack("!II", 4, 2012)     # bytes 12..20 of the client's handshake
REQUESTS = {3000: "auth", 3001: "query", 3002: "chmod", 3003: "close", 3004: "dirlist",
            3005: "gpfile", 3006: "protocol", 3007: "login", 3008: "mkdir", 3009: "mv",
            3010: "open", 3011: "ping", 3012: "chkpoint", 3013: "read", 3014: "rm",
            3015: "rmdir", 3016: "sync", 3017: "stat", 3018: "set", 3019: "write",
            3020: "fattr", 3021: "prepare", 3022: "statx", 3023: "endsess", 3024: "bind",
            3025: "readv", 3026: "pgwrite", 3027: "locate", 3028: "truncate", 3029: "sigver",
            3030: "pgread", 3031: "writev"}


@dataclass
class Flow:
    """One client connection: the client's byte stream (reassembled by sequence number)."""
    next_seq: int | None = None
    buf: bytearray = field(default_factory=bytearray)
    skip: int = 0                   # body bytes of the current request still to pass
    started: bool = False
    last_from_client: bool = False  # the last payload segment's direction


@dataclass
class Tally:
    flights: int = 0
    connections: int = 0
    requests: Counter = field(default_factory=Counter)
    flows: dict = field(default_factory=dict)
    gaps: int = 0                   # lost capture (the parser resynchronises)

    def to_json(self) -> dict:
        return {"flights": self.flights, "connections": self.connections,
                "requests": dict(self.requests), "gaps": self.gaps}


def _parse(flow: Flow, tally: Tally) -> None:
    buf = flow.buf
    if not flow.started:
        if len(buf) < 20:
            return
        if bytes(buf[12:20]) == HANDSHAKE_TAIL:
            del buf[:20]
        flow.started = True
    while True:
        if flow.skip:
            n = min(flow.skip, len(buf))
            del buf[:n]
            flow.skip -= n
            if flow.skip:
                return
        if len(buf) < 24:
            return
        reqid = struct.unpack_from("!H", buf, 2)[0]
        dlen = struct.unpack_from("!i", buf, 20)[0]
        tally.requests[REQUESTS.get(reqid, str(reqid))] += 1
        del buf[:24]
        flow.skip = max(0, dlen)


def feed(tally: Tally, frame: bytes, port: int) -> None:
    """Account one Ethernet frame."""
    if len(frame) < 34 or frame[12:14] != b"\x08\x00":
        return
    ip = frame[14:]
    ihl = (ip[0] & 0x0F) * 4
    if ip[9] != 6:
        return
    total = struct.unpack_from("!H", ip, 2)[0]
    tcp = ip[ihl:total]
    if len(tcp) < 20:
        return
    sport, dport, seq = struct.unpack_from("!HHI", tcp, 0)
    flags = tcp[13]
    payload = tcp[(tcp[12] >> 4) * 4:]
    if dport == port:
        key = (ip[12:16], sport)
        if flags & 0x02:                                  # SYN: a new connection
            tally.connections += 1
            tally.flows[key] = Flow(next_seq=(seq + 1) & 0xFFFFFFFF)
            return
        flow = tally.flows.setdefault(key, Flow())
        if not payload:
            return
        if flow.next_seq is not None and seq != flow.next_seq:
            if (seq - flow.next_seq) & 0x80000000:        # old data: a retransmission
                return
            tally.gaps += 1                               # lost capture: resynchronise
            flow.buf.clear()
            flow.skip = 0
        if not flow.last_from_client:
            tally.flights += 1
        flow.last_from_client = True
        flow.next_seq = (seq + len(payload)) & 0xFFFFFFFF
        flow.buf += payload
        _parse(flow, tally)
    elif sport == port and payload:
        flow = tally.flows.get((ip[16:20], dport))
        if flow is not None:
            flow.last_from_client = False


@contextlib.contextmanager
def counting(ns: str, port: int, out: Path):
    """bench.rtcount inside ``ns`` for the duration of the block; the tally is in ``out``."""
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": f"{repo}:{repo / 'src'}"}
    proc = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-m", "bench.rtcount",
                             "--port", str(port), "--out", str(out)], env=env, cwd=str(repo),
                            stdout=subprocess.PIPE, text=True)
    try:
        if proc.stdout is None or proc.stdout.readline().strip() != "ready":
            raise RuntimeError("bench.rtcount did not start")
        yield
    finally:
        time.sleep(0.5)             # the last replies (close) are on their way
        proc.terminate()
        proc.wait(timeout=30)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.rtcount")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--iface", default="eth0")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
    sock.bind((args.iface, 0))
    sock.settimeout(0.2)
    tally = Tally()
    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(1))
    print("ready", flush=True)
    while not stop:
        try:
            frame = sock.recv(70000)
        except (TimeoutError, InterruptedError):
            continue
        feed(tally, frame, args.port)
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(tally.to_json(), fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
