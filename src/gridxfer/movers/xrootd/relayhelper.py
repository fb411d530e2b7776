"""A relay helper process: runs small-file relays (relay.py) for the campaign process.

Started by ``relaypool`` as ``python -m gridxfer.movers.xrootd.relayhelper``; speaks
``relaywire`` frames on its stdin (requests, cancels) and stdout (outcomes). Each request
runs ``relay`` on a thread of its own, as in the campaign process, with XrdCl's
connections, GIL and thread switches of this process. Nothing is on its command line
but the module: tokens arrive in the requests, over the pipe.

It ends when its stdin ends: the campaign process exited or was killed (the kernel
closes the pipe; its ends are close-on-exec, so no other child holds them). The copies in
flight are then abandoned with ``os._exit``, and the servers drop their unclosed POSC
files with the connections: nothing partial stays. (Not ``PR_SET_PDEATHSIG``: it follows
the thread that started the helper, a campaign worker that may end before the process.)
"""
from __future__ import annotations

import logging
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import BinaryIO

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import TransferParams
from gridxfer.movers.xrootd import relaywire as wire
from gridxfer.movers.xrootd.authz import bearer, forget
from gridxfer.movers.urls import server_of
from gridxfer.movers.xrootd.pipeline import _latency
from gridxfer.movers.xrootd.relay import TooLarge
from gridxfer.movers.xrootd.relaynative import run as relay
from gridxfer.movers.xrootd.upload import _posc
from gridxfer.redact import RedactFilter

THREADS = 1024          # relays at once (the campaign's link caps bound what is sent)


class Helper:
    def __init__(self, out: BinaryIO) -> None:
        self.out, self.lock = out, threading.Lock()
        self.cancels: dict[int, threading.Event] = {}
        self.pool = ThreadPoolExecutor(THREADS, thread_name_prefix="relay")

    def serve(self, inp: BinaryIO) -> None:
        while (msg := wire.read(inp)) is not None:
            if isinstance(msg, wire.Cancel):
                ev = self.cancels.get(msg.rid)
                if ev is not None:
                    ev.set()
            elif isinstance(msg, wire.Request):
                self.cancels[msg.rid] = threading.Event()
                self.pool.submit(self.run, msg)

    def run(self, req: wire.Request) -> None:
        cancel = self.cancels[req.rid]
        params = TransferParams(timeout=req.timeout, cancel=cancel, tokens=req.tokens)
        try:
            with bearer(req.tokens, req.src, req.dst):
                up = relay(req.src, req.dst, params, None, read_back=req.read_back,
                           expected=req.expected)
            result = wire.Outcome(req.rid, up.bytes, up.adler32, up.stored_adler32)
        except TooLarge:
            result = wire.Outcome(req.rid, too_large=True)
        except TransferError as exc:
            result = wire.Outcome(req.rid, error=(exc.error_class.value, str(exc)))
        except BaseException as exc:        # noqa: BLE001 - reported, the helper goes on
            result = wire.Outcome(req.rid, error=(ErrorClass.OTHER.value,
                                                  f"relay helper: {type(exc).__name__}: {exc}"))
        server = server_of(req.dst)
        result = result.seen(_latency.get(server), _posc.get(server))
        self.cancels.pop(req.rid, None)
        with self.lock:
            wire.write(self.out, result)


def main() -> None:
    inp, out = sys.stdin.buffer, os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr             # a stray print never corrupts the frames
    shown = logging.StreamHandler(sys.stderr)   # as the CLI's: redacted, one line each
    shown.setFormatter(logging.Formatter("gridxfer: relay helper: %(levelname)s: %(message)s"))
    shown.addFilter(RedactFilter())
    logging.getLogger("gridxfer").addHandler(shown)
    logging.getLogger("gridxfer").setLevel(logging.WARNING)
    try:
        Helper(out).serve(inp)
    finally:
        forget()                        # its own ztn login token file, if it wrote one
        os._exit(0)                     # copies in flight are abandoned with the process


if __name__ == "__main__":
    main()
