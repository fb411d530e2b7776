"""Userspace WAN delay line: one process per link direction, on a TUN device.

This kernel has no ``sch_netem``, so one-way delay and random loss are added here.
The router namespace routes cross-tier traffic into a TUN device (policy routing,
``ip rule iif <veth> lookup <table>``); tc htb on that TUN limits the rate. This process
reads every packet from the TUN, drops it with probability ``loss``, and writes it back
to the same TUN ``delay`` seconds later. The kernel then sees it arrive *from* the TUN
and routes it with the main table to the destination host.

The delay is constant, so release times are monotonic and a deque is the queue. One
``select`` per wake-up (microsecond timeout), non-blocking bursts of reads; packets are
up to 64 KB (the TUN MTU), so 1 Gbit/s is ~2000 packets/s of Python work. ``select``
wakes up 0.1-0.3 ms late on this VM; an EWMA of that lateness is subtracted from the
next timeout, so the *mean* one-way delay matches the configured one.

Run as ``python -m gridxfer.testbed.delayline --dev tl0a --delay 0.009 --loss 0.0001``
inside the namespace that holds the TUN.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import fcntl
import os
import random
import select
import signal
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
MAX_PACKET = 65536 + 64
READ_BURST = 256
MAX_QUEUED_BYTES = 256 * 2**20     # hard cap on what waits in the line (drops beyond it)
MAX_COMP = 0.0003                  # at most 0.3 ms of wake-up latency compensation
PR_SET_TIMERSLACK = 29
RT_PRIORITY = 10


def open_tun(name: str) -> int:
    """Attach to the (persistent) TUN device ``name``; returns a non-blocking fd."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return fd


class Counters:
    __slots__ = ("packets", "dropped", "overflow", "bytes")

    def __init__(self) -> None:
        self.packets = self.dropped = self.overflow = self.bytes = 0


def run(fd: int, delay: float, loss: float, *, seed: int | None = None,
        stop_after: float | None = None, counters: Counters | None = None) -> Counters:
    """Delay loop on an open TUN fd until SIGTERM (or ``stop_after`` seconds)."""
    rng = random.Random(seed)
    rand = rng.random
    queue: collections.deque[tuple[float, bytes]] = collections.deque()
    c = counters or Counters()
    queued = 0
    now = time.monotonic
    read, write = os.read, os.write
    end = None if stop_after is None else now() + stop_after
    running = [True]

    def _stop(*_: object) -> None:
        running[0] = False

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    rlist = [fd]
    comp = 0.0          # EWMA of how late select() wakes up; we wake that much earlier
    while running[0]:
        t = now()
        if end is not None and t >= end:
            break
        timeout = 0.5 if not queue else max(0.0, queue[0][0] - comp - t)
        try:
            ready, _, _ = select.select(rlist, [], [], timeout)
        except InterruptedError:
            continue
        woke = now()
        if not ready and queue:
            # clipped: a wake-up delayed by another process's CPU burst is not the
            # timer's usual lateness, and must not make later packets leave early
            late = min(MAX_COMP, max(0.0, woke - (t + timeout)))
            comp += 0.05 * (late - comp)
        t = woke
        if ready:
            for _ in range(READ_BURST):
                try:
                    pkt = read(fd, MAX_PACKET)
                except BlockingIOError:
                    break
                # each packet's own arrival: one taken when select() woke would let a
                # packet that arrived later in the burst (the loop preempted under load)
                # leave that much early (seen: 3 ms early on a 4 ms line)
                release = now() + delay
                c.packets += 1
                if loss and rand() < loss:
                    c.dropped += 1
                    continue
                if queued > MAX_QUEUED_BYTES:
                    c.overflow += 1
                    continue
                queue.append((release, pkt))
                queued += len(pkt)
                c.bytes += len(pkt)
        horizon = t + comp
        while queue and queue[0][0] <= horizon:
            _, pkt = queue.popleft()
            queued -= len(pkt)
            try:
                write(fd, pkt)
            except OSError:          # e.g. EIO while the device goes down
                c.overflow += 1
    return c


def _tight_timers() -> None:
    """Timer slack 1 ns (default 50 us), and real-time (SCHED_FIFO) priority when allowed:
    the emulated link must keep its RTT while other processes load the CPUs (the kernel's
    RT throttling still leaves them 5 %, and this loop sleeps between packets). Best effort."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(RT_PRIORITY))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dev", required=True, help="TUN device name (must exist)")
    ap.add_argument("--delay", type=float, required=True, help="one-way delay in seconds")
    ap.add_argument("--loss", type=float, default=0.0, help="drop probability per packet")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args(argv)
    _tight_timers()
    try:
        fd = open_tun(args.dev)
    except OSError as exc:
        print(f"delayline: cannot attach to TUN {args.dev}: {exc.strerror}", file=sys.stderr)
        return 1
    c = run(fd, args.delay, args.loss, seed=args.seed)
    print(f"delayline {args.dev}: packets={c.packets} dropped={c.dropped} "
          f"overflow={c.overflow}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
