"""The frames between the campaign process and its relay helpers (relaypool.py,
relayhelper.py): a 4-byte big-endian length, then a pickle of one of the values below.
Both ends are this program, started by it on a pipe nobody else holds; tokens travel
in ``Request`` over that pipe, never on a command line."""
from __future__ import annotations

import pickle
import struct
from dataclasses import dataclass, replace
from typing import BinaryIO

from gridxfer.movers.base import TokenPair

_LEN = struct.Struct(">I")


@dataclass(frozen=True)
class Request:
    rid: int
    src: str
    dst: str
    read_back: bool
    expected: str | None
    timeout: float
    tokens: TokenPair | None = None

    def __repr__(self) -> str:          # never a token in a traceback or log
        return f"Request({self.rid}, {self.src!r} -> {self.dst!r})"


@dataclass(frozen=True)
class Cancel:
    rid: int


@dataclass(frozen=True)
class Outcome:
    rid: int
    bytes: int = 0
    adler32: str = ""
    stored_adler32: str | None = None
    too_large: bool = False
    error: tuple[str, str] | None = None    # (ErrorClass value, the error's text)
    latency: float | None = None            # the helper's pipeline.observe of the server
    posc: bool | None = None                # its upload.posc_honoured answer, once probed

    def seen(self, latency: float | None, posc: bool | None) -> Outcome:
        return replace(self, latency=latency, posc=posc)


def write(out: BinaryIO, msg: Request | Cancel | Outcome) -> None:
    body = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_LEN.pack(len(body)) + body)
    out.flush()


def read(inp: BinaryIO) -> Request | Cancel | Outcome | None:
    """The next frame; None at the end of the stream (or a torn last frame)."""
    head = inp.read(_LEN.size)
    if len(head) < _LEN.size:
        return None
    (n,) = _LEN.unpack(head)
    body = inp.read(n)
    if len(body) < n:
        return None
    return pickle.loads(body)
