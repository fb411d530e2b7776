"""What the userspace delay line guarantees whatever the CPU load: no packet leaves early
(by more than MAX_COMP), none is reordered, and exactly the packets its seeded random
draws pick are dropped. A SOCK_SEQPACKET socketpair stands in for the TUN fd (one packet
per read, written back to the same fd). How close the *mean* delay and the measured loss
come to the configuration under load is bench/emulator.py's figure, not a test."""
from __future__ import annotations

import os
import random
import signal
import socket
import struct
import threading
import time

from gridxfer.testbed import delayline

DELAY, LOSS, SEED, COUNT = 0.004, 0.01, 1234, 3000
WINDOW = 100            # kept packets in flight at most (see feed)


def test_no_packet_early_none_reordered_and_the_seeded_drops_exactly():
    rand = random.Random(SEED).random
    kept = [seq for seq in range(COUNT) if not rand() < LOSS]
    kept_set = set(kept)
    line, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    line.setblocking(False)
    sent: dict[int, float] = {}
    got: list[tuple[int, float]] = []

    kept_before = [0] * (COUNT + 1)         # kept packets among seq < i
    for i in range(COUNT):
        kept_before[i + 1] = kept_before[i] + (i in kept_set)

    def feed() -> None:
        """At most WINDOW kept packets in flight: a socketpair's queues hold a few hundred
        packets (a TUN device never refuses the line's writes), and a drain thread starved
        by a loaded CPU once let them fill (overflow=371 in one run)."""
        for seq in range(COUNT):
            deadline = time.monotonic() + 30
            while kept_before[seq] - len(got) > WINDOW and time.monotonic() < deadline:
                time.sleep(0.0005)
            sent[seq] = time.monotonic()
            peer.send(struct.pack("!I", seq) + b"x" * 60)
            if seq % 50 == 49:
                time.sleep(0.001)

    def drain() -> None:
        """Until every kept packet is back (or 30 s without one); then stop the line the
        way the testbed does, with SIGTERM (handled in the main thread, inside run)."""
        peer.settimeout(30.0)
        try:
            while len(got) < len(kept):
                pkt = peer.recv(2048)
                got.append((struct.unpack("!I", pkt[:4])[0], time.monotonic()))
        except (TimeoutError, OSError):
            pass
        os.kill(os.getpid(), signal.SIGTERM)

    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    threads = [threading.Thread(target=feed), threading.Thread(target=drain)]
    try:
        for t in threads:
            t.start()
        counters = delayline.run(line.fileno(), DELAY, LOSS, seed=SEED, stop_after=120)
        for t in threads:
            t.join()
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        line.close()
        peer.close()

    assert counters.packets == COUNT and counters.overflow == 0
    assert counters.dropped == COUNT - len(kept)
    assert [seq for seq, _ in got] == kept                      # in order, the same ones
    early = [(seq, at - sent[seq]) for seq, at in got
             if at - sent[seq] < DELAY - delayline.MAX_COMP]
    assert early == []
