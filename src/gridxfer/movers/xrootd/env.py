"""XrdCl client defaults, applied once per process before the first channel is made.

XrdCl reads ``ConnectionWindow``/``ConnectionRetry`` when it creates a channel (one per
host:port + login) and keeps them for that channel's life. Its defaults (120 s, 5 tries)
hold every request to a server that refuses connections for up to 10 minutes; a request
queued on such a channel expires at its own timeout instead ("[ERROR] Operation expired",
class TIMEOUT) rather than failing with the connection error. And after such an error
XrdCl fails every request on that channel at once for ``StreamErrorWindow`` (1800 s): a
server that comes back stays unreachable for half an hour, whatever the circuit breaker's
half-open probes find (0 here, as EOS sets it: each request tries to connect; the breaker
decides how often that happens). So every gridxfer module
that makes an XrdCl object (the mover, checksum queries, the campaign's space watcher)
imports ``client`` from here. Explicit XRD_* variables still win (EnvPutInt does not
override values imported from the environment).

``WorkerThreads`` (the threads that run every reply's handler; XrdCl's default 3) is 1:
gridxfer's handlers (relay.cpp's, pipeline.py's, tape.py's) only record the reply and wake
the thread that waits for it, and never make a synchronous XrdCl call (which would wait on
the one thread). With three, each reply woke an idle thread: measured on 5,000 x 4 KB to a
loopback xrootd at 8 (docs/performance-notes.md, "one XrdCl worker thread"), 1.21 -> 1.13 s
by the median of 8 rounds. Read once, when XrdCl makes its PostMaster (the first request).
"""
from __future__ import annotations

from XRootD import client

CONNECT_TIMEOUT = 10
# XrdCl waits for an answer to a request up to RequestTimeout (default 1800 s) and checks
# timeouts every TimeoutResolution (default 15 s).
DEFAULTS = {"ConnectionWindow": CONNECT_TIMEOUT, "ConnectionRetry": 1,
            "RequestTimeout": 300, "StreamTimeout": 60, "TimeoutResolution": 5,
            "StreamErrorWindow": 0, "WorkerThreads": 1}

for _key, _value in DEFAULTS.items():
    client.EnvPutInt(_key, _value)


__all__ = ["CONNECT_TIMEOUT", "DEFAULTS", "client"]
