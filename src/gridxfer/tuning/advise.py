"""Socket-buffer advice from the bandwidth-delay product, with the arithmetic shown.

BDP = bandwidth / 8 x RTT. 1 Gb/s x 18.2 ms = 125 MB/s x 0.0182 s = 2,275,000 bytes ~ 2.3 MB;
the Service Challenge seed ran 2.75-3 MB windows on that path (1.2-1.3x BDP). With N parallel
streams each needs BDP/N. Linux doubles SO_RCVBUF/SO_SNDBUF (half is bookkeeping), and with
the default tcp_adv_win_scale only about half of an autotuned buffer is window, so the
autotuning maximum is 2x the window, rounded up to a power of two.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from gridxfer.errors import UsageError

DEFAULT_HEADROOM = 1.25     # within the SC seed's 1.2-1.3x


@dataclass(frozen=True)
class Advice:
    bandwidth_bps: float
    rtt_s: float
    streams: int
    headroom: float
    bdp_bytes: int
    per_stream_bdp: int
    window_bytes: int          # per stream, with headroom: what SO_RCVBUF/SO_SNDBUF should ask
    kernel_allocates: int      # the kernel doubles the setsockopt value
    buffer_max: int            # rmem_max/wmem_max and the tcp_rmem/tcp_wmem maximum
    steps: tuple[str, ...]

    def sysctl(self) -> dict[str, str]:
        return {"net.core.rmem_max": str(self.buffer_max),
                "net.core.wmem_max": str(self.buffer_max),
                "net.ipv4.tcp_rmem": f"4096 87380 {self.buffer_max}",
                "net.ipv4.tcp_wmem": f"4096 65536 {self.buffer_max}"}


def _mb(n: float) -> str:
    return f"{n / 1e6:.2f} MB"


def next_pow2(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(n, 1))))


def advise(bandwidth_bps: float, rtt_s: float, *, streams: int = 1,
           headroom: float = DEFAULT_HEADROOM) -> Advice:
    if bandwidth_bps <= 0:
        raise UsageError("--bandwidth must be positive")
    if rtt_s <= 0:
        raise UsageError("--rtt must be positive")
    if streams < 1:
        raise UsageError("--streams must be at least 1")
    if not 1.0 <= headroom <= 4.0:
        raise UsageError("--headroom must be between 1 and 4")
    bytes_per_s = bandwidth_bps / 8
    bdp = round(bytes_per_s * rtt_s)
    per_stream = math.ceil(bdp / streams)
    window = math.ceil(per_stream * headroom)
    buffer_max = next_pow2(2 * window)
    steps = [
        f"BDP = {bandwidth_bps / 1e9:g} Gb/s x {rtt_s * 1e3:g} ms = {bytes_per_s / 1e6:g} MB/s x "
        f"{rtt_s:g} s = {bdp:,} bytes ~ {bdp / 1e6:.1f} MB",
    ]
    if streams > 1:
        steps.append(
            f"per stream: {bdp:,} / {streams} streams = {per_stream:,} bytes ~ {_mb(per_stream)}"
        )
    steps += [
        f"window with {headroom:g}x headroom: {per_stream:,} x {headroom:g} = {window:,} bytes ~ "
        f"{_mb(window)} (the SC seed used 2.75-3 MB for 1 Gb/s x 18.2 ms, 1.2-1.3x BDP)",
        f"kernel doubles SO_RCVBUF/SO_SNDBUF: setsockopt({window:,}) allocates "
        f"{2 * window:,} bytes; rmem_max/wmem_max must be >= {window:,}",
        f"autotuning max = 2 x window = {2 * window:,} -> {buffer_max:,} bytes "
        f"({buffer_max / 2**20:g} MiB, next power of two)",
    ]
    return Advice(bandwidth_bps, rtt_s, streams, headroom, bdp, per_stream, window, 2 * window,
                  buffer_max, tuple(steps))


def advice_profile(advice: Advice, name: str) -> str:
    """A sysctl.d profile text for ``advice`` (what ``tune advise --write-profile`` writes)."""
    head = [
        f"# gridxfer profile: {name}",
        f"# source: gridxfer tune advise --bandwidth {advice.bandwidth_bps / 1e6:g}Mbit/s "
        f"--rtt {advice.rtt_s * 1e3:g}ms --streams {advice.streams} "
        f"--headroom {advice.headroom:g}",
        f"# intent: buffers for {advice.bandwidth_bps / 1e9:g} Gb/s x {advice.rtt_s * 1e3:g} ms "
        f"with {advice.streams} stream(s)",
    ]
    head += [f"#   {s}" for s in advice.steps]
    return "\n".join(head + [f"{k} = {v}" for k, v in advice.sysctl().items()]) + "\n"
