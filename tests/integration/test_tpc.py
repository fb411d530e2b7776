"""Third-party copy: gsiftp -> gsiftp (gfal2) and root -> root (XrdCl), where this host
carries no data. Shown with this process's read_chars (every byte read from a socket
counts): a TPC reads almost nothing, a copy through this host reads the whole file."""
from __future__ import annotations

import os
import subprocess
import zlib

import psutil
import pytest

from gridxfer.errors import UsageError
from gridxfer.movers import TransferParams, get_mover, normalise_adler32
from gridxfer.testbed.localgrid import put_local

pytestmark = pytest.mark.integration

SIZE = 48 << 20


@pytest.fixture(scope="module")
def payload():
    block = os.urandom(1 << 20)
    return b"".join(block[i:] + block[:i] for i in range(SIZE >> 20))


def _read_chars() -> int:
    return psutil.Process().io_counters().read_chars


def _copy(src: str, dst: str, tpc: bool):
    before = _read_chars()
    out = get_mover(src, dst, third_party=tpc).copy(
        src, dst, params=TransferParams(third_party=tpc, streams=2, timeout=300))
    return out, _read_chars() - before


@pytest.mark.parametrize("src_ep,dst_ep,mode", [("t0-xrd", "t1a-xrd1", "xrdcl-tpc"),
                                                ("t0-gsiftp", "t1a-gsiftp", "gfal-tpc")])
def test_third_party_copy_moves_no_data_through_this_host(local_grid, payload,
                                                          src_ep, dst_ep, mode):
    src = put_local(local_grid, src_ep, "tpc/big.dat", payload)
    dst = local_grid.endpoints[dst_ep].url + "tpc/big.dat"
    out, read = _copy(src, dst, tpc=True)
    assert out.mode == mode and out.bytes == SIZE
    assert out.checksum == normalise_adler32(zlib.adler32(payload))
    assert read < SIZE // 8, f"TPC read {read} bytes through this host"
    print(f"{mode}: {SIZE} bytes in {out.seconds:.2f} s, {read} bytes read by this process")
    on_disk = local_grid.local_path(dst)
    assert on_disk.stat().st_size == SIZE
    tool = subprocess.run(["xrdadler32", str(on_disk)], capture_output=True, text=True,
                          check=True).stdout.split()[0]
    assert normalise_adler32(tool) == out.checksum


def test_copy_through_this_host_is_measured(local_grid, payload):
    """Control for the measure above: without TPC the bytes do pass through us."""
    src = put_local(local_grid, "t0-xrd", "tpc/ctl.dat", payload)
    out, read = _copy(src, local_grid.endpoints["t1a-xrd2"].url + "tpc/ctl.dat", tpc=False)
    assert out.mode == "xrdcl" and read >= SIZE
    print(f"xrdcl (no TPC): {read} bytes read by this process")


def test_tpc_refused_for_mixed_protocols(local_grid):
    src = local_grid.endpoints["t0-xrd"].url + "x.dat"
    with pytest.raises(UsageError, match="third-party copy is not possible from root:// to gsiftp://"):
        get_mover(src, local_grid.endpoints["t1a-gsiftp"].url + "x.dat", third_party=True)
