"""bench.rtcount: flights, connections and XRootD requests from Ethernet frames."""
from __future__ import annotations

import struct

from bench.rtcount import Tally, feed

PORT = 1094
CLIENT, SERVER = bytes([198, 18, 151, 2]), bytes([198, 18, 152, 2])


def frame(src: bytes, dst: bytes, sport: int, dport: int, seq: int, payload: bytes = b"",
          flags: int = 0x18) -> bytes:
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, flags, 65535, 0, 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 0, 0, 64, 6, 0,
                     src, dst)
    return b"\x00" * 12 + b"\x08\x00" + ip + tcp + payload


def request(reqid: int, body: bytes = b"") -> bytes:
    return struct.pack("!2sH16si", b"\x00\x01", reqid, b"\x00" * 16, len(body)) + body


def test_pipelined_requests_are_one_flight_and_waited_ones_are_not():
    t = Tally()
    c = lambda seq, data: feed(t, frame(CLIENT, SERVER, 40000, PORT, seq, data), PORT)
    s = lambda data: feed(t, frame(SERVER, CLIENT, PORT, 40000, 7, data), PORT)
    feed(t, frame(CLIENT, SERVER, 40000, PORT, 99, flags=0x02), PORT)       # SYN
    hello = b"\x00" * 12 + struct.pack("!II", 4, 2012) + request(3006, b"abcd")
    c(100, hello)
    s(b"reply")
    seq = 100 + len(hello)
    opened = request(3010, b"/data/f")
    c(seq, opened)
    s(b"handle")
    seq += len(opened)
    burst = request(3019, b"x" * 5000) + request(3003)      # write + close back to back
    c(seq, burst[:3000])                                     # split over two segments
    c(seq + 3000, burst[3000:])
    c(seq, burst[:3000])                                     # a retransmission: ignored
    s(b"ok")
    assert t.connections == 1
    assert t.flights == 3
    assert t.requests == {"protocol": 1, "open": 1, "write": 1, "close": 1}
    assert t.gaps == 0


def test_other_ports_and_protocols_are_not_counted():
    t = Tally()
    feed(t, frame(CLIENT, SERVER, 40000, 2811, 1, request(3010)), PORT)
    feed(t, b"\x00" * 12 + b"\x86\xdd" + b"\x00" * 60, PORT)                 # IPv6
    assert (t.flights, t.connections, sum(t.requests.values())) == (0, 0, 0)
