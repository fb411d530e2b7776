"""The adler32 the movers compute over bytes: zlib-ng's when installed, zlib's otherwise.

Both take ``(data, value=1)``, return the same unsigned 32-bit value and release the GIL on
large buffers. zlib-ng's is vectorised: 4.6 ms per 64 MB against zlib's 21.7 ms on this
project's 2-core VM (BENCHMARKS.md "Fifth pass"). Every large upload and every local
source checksum sums the whole file once, so on loopback, where the link is the CPU, the
difference is ~17 ms of a core per 64 MB file.
"""
from __future__ import annotations

try:
    from zlib_ng.zlib_ng import adler32
    IMPLEMENTATION = "zlib-ng"
except ImportError:     # pragma: no cover - zlib-ng is a dependency; a bare install still works
    from zlib import adler32
    IMPLEMENTATION = "zlib"

__all__ = ["adler32", "IMPLEMENTATION"]
