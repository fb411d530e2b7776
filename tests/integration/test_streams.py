"""`streams: N` really opens N data connections (counted with psutil mid-transfer).

GridFTP: file -> gsiftp upload through globus-url-copy -p N (in-process gfal2 for N=1):
the copying process holds one control connection to the server's port plus N data
connections.
XRootD: root -> file download through XrdCl: the file is read over N channels of one TCP
connection each (XrdCl substreams hang on throttled servers, see movers/xrootd/mover.py), all to
the server's port, next to the one connection of the metadata channel (stat, checksum,
mv); `ss` shows that N of them carry the data.
Each case runs against its own fresh server so no earlier channel is reused.
"""
from __future__ import annotations

import contextlib
import os
import re
import subprocess
import threading
import time

import psutil
import pytest

from gridxfer.movers import TransferParams, get_mover
from gridxfer.testbed.localgrid import ServerSpec

pytestmark = pytest.mark.integration

SIZE_MB = 192


@pytest.fixture(scope="module")
def big_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("streams") / "big.dat"
    block = os.urandom(1 << 20)
    with open(path, "wb") as fh:
        for i in range(SIZE_MB):
            fh.write(block[i:] + block[:i])   # distinct blocks, cheap to make
    return path


class Sampler:
    """Samples ESTABLISHED TCP connections of some process(es) while a copy runs."""

    def __init__(self, pids_fn, keep) -> None:
        self.pids_fn, self.keep = pids_fn, keep
        self.samples: list[list] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            conns = []
            for pid in self.pids_fn():
                with contextlib.suppress(psutil.NoSuchProcess):
                    conns += [c for c in psutil.Process(pid).net_connections(kind="tcp")
                              if c.status == psutil.CONN_ESTABLISHED and c.raddr and self.keep(c)]
            if conns:
                self.samples.append(conns)
            time.sleep(0.02)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()

    def peak(self) -> int:
        return max((len(s) for s in self.samples), default=0)


def _copy(src: str, dst: str, streams: int):
    return get_mover(src, dst).copy(src, dst, params=TransferParams(streams=streams, timeout=300,
                                                                    overwrite=True))


@pytest.mark.parametrize("streams,mode", [(4, "globus-url-copy"), (1, "gridftp-native")])
def test_gridftp_upload_opens_n_data_connections(streams, mode, make_grid, big_file):
    """streams=N>1 runs `globus-url-copy -p N`; streams=1 runs in-process on gridxfer's own
    GridFTP client (session reuse). Either way the copying processes hold 1 control + N data
    connections."""
    inv = make_grid([ServerSpec(f"gx-streams-{streams}", "gsiftp", "T9")])
    ep = next(iter(inv.endpoints.values()))
    me = psutil.Process()
    before = {(c.laddr, c.raddr) for c in me.net_connections(kind="tcp") if c.raddr}

    def copiers():   # the process carrying the data (the parent keeps a metadata session)
        if streams == 1:
            return [me.pid]
        found = []
        for proc in me.children(recursive=True):
            try:
                if proc.name() == "globus-url-copy":
                    found.append(proc.pid)
            except psutil.NoSuchProcess:
                pass
        return found

    def new(c) -> bool:   # not one of this process's connections from earlier tests
        return (c.laddr, c.raddr) not in before and c.raddr.ip in ("127.0.0.1", "::1")

    # data connections: the copiers' new established sockets other than the control one
    with Sampler(copiers, lambda c: new(c) and c.raddr.port != ep.port) as data, \
            Sampler(copiers, lambda c: new(c) and c.raddr.port == ep.port) as control:
        out = _copy(f"file://{big_file}", ep.url + "big.dat", streams)
    assert out.mode == mode and out.streams_used == streams
    assert out.bytes == SIZE_MB << 20
    assert data.peak() == streams, [len(s) for s in data.samples]
    assert control.peak() == 1
    print(
        f"gridftp streams={streams}: data connections per sample {[len(s) for s in data.samples]}"
    )


def _bytes_per_conn(port: int) -> list[int]:
    out = subprocess.run(["ss", "-tinH", "state", "established", f"( dport = :{port} )"],
                         capture_output=True, text=True, check=True).stdout
    return [int(x) for x in re.findall(r"bytes_received:(\d+)", out)]


@pytest.mark.parametrize("streams", [4, 1])
def test_xrootd_download_opens_n_data_substreams(streams, make_grid, big_file, tmp_path):
    from gridxfer.testbed.localgrid import put_local

    inv = make_grid([ServerSpec(f"xrd-streams-{streams}", "xrootd", "T9")])
    name, ep = next(iter(inv.endpoints.items()))
    put_local(inv, name, "big.dat", big_file.read_bytes())
    me = psutil.Process()
    with Sampler(lambda: [me.pid], lambda c: c.raddr.port == ep.port) as conns:
        out = _copy(ep.url + "big.dat", f"file://{tmp_path}/big.dat", streams)
    assert out.mode == "xrdcl" and out.streams_used == streams
    # N data connections plus one of the metadata channel (stat / checksum / mv)
    assert conns.peak() == streams + 1, [len(s) for s in conns.samples]
    carried = sorted(_bytes_per_conn(ep.port), reverse=True)
    assert len(carried) == streams + 1                    # channels stay open after the copy
    busy = [b for b in carried if b > (SIZE_MB << 20) // (2 * streams)]
    assert len(busy) == streams, carried                  # each data substream carried a share
    print(f"xrootd streams={streams}: bytes per connection {carried}")


@pytest.mark.parametrize("streams", [4, 1])
def test_gridftp_third_party_opens_n_data_connections(streams, make_grid):
    """gsiftp -> gsiftp (gfal2 native TPC): the servers open N data connections between
    them; counted on the destination server's session processes."""
    inv = make_grid([ServerSpec(f"tpc-a-{streams}", "gsiftp", "T9"),
                     ServerSpec(f"tpc-b-{streams}", "gsiftp", "T9")])
    src_ep, dst_ep = inv.endpoints[f"tpc-a-{streams}"], inv.endpoints[f"tpc-b-{streams}"]
    path = inv.local_path(src_ep.url + "big.dat")
    with open(path, "wb") as fh:
        fh.truncate(384 << 20)                    # sparse: free to make, seconds to send
    subprocess.run(["chown", inv.extra["service_user"], str(path)], check=True)

    def sessions():
        try:
            return [p.pid for p in psutil.Process(dst_ep.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    src, dst = src_ep.url + "big.dat", dst_ep.url + "big.dat"
    with Sampler(sessions, lambda c: c.laddr.port != dst_ep.port) as data:
        out = get_mover(src, dst, third_party=True).copy(
            src, dst, params=TransferParams(streams=streams, third_party=True, checksum=None,
                                            timeout=300))
    assert out.mode == "gfal-tpc" and out.streams_used == streams
    assert data.peak() == streams, [len(s) for s in data.samples]
    print(f"gridftp TPC streams={streams}: data connections per sample "
          f"{[len(s) for s in data.samples][::5]}")
