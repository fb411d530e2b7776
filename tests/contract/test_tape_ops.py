"""ONE contract suite for every TapeOps implementation (movers/tape.py), on a real
tape-backed server of the local grid (testbed/tapexrd.py: xrootd + its prepare plugin over
the EMULATED tape). A file written is DISK_ONLY, ON_TAPE after migration, TAPE_ONLY once
evicted, online again after bring_online; status of many files takes few requests."""
from __future__ import annotations

import os
import time
import zlib
from pathlib import Path

import pytest

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers import TransferParams, capabilities_of, get_mover, mover_for
from gridxfer.movers.tape import Residency, TapeOps
from gridxfer.testbed.gridspec import ServerSpec
from gridxfer.testbed.tapexrd import TapeSpec

pytestmark = pytest.mark.integration

# fast drives; a file is migrated once unmodified for an hour: a test lets it go by
# backdating it (no race with the drives)
FAST = TapeSpec(drives=2, rate=200e6, mount=0.1, position=0.01, min_age=3600, max_session=5)
PROTOCOLS = ["root"]                    # schemes whose mover has TapeOps


@pytest.fixture(scope="module")
def tape_grid(tmp_path_factory, grid_ca):
    import dataclasses

    from gridxfer.testbed import localgrid
    from tests.conftest import _gridxfer_home_env
    home = tmp_path_factory.mktemp("tapehome")
    spec = localgrid.LocalGridSpec(servers=(ServerSpec("t1-tape", "xrootd", "T1", tape=FAST),
                                            ServerSpec("t1-disk", "xrootd", "T1")),
                                   gsi=grid_ca, owner_pid=os.getpid())
    with _gridxfer_home_env(home):
        inv = localgrid.up(dataclasses.replace(spec))
    yield inv
    with _gridxfer_home_env(home):
        localgrid.down()


def poll(fn, done, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def put(tape_grid, rel: str, data: bytes) -> str:
    ep = tape_grid.endpoints["t1-tape"]
    path = Path(ep.data_dir) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if os.geteuid() == 0:
        from gridxfer.testbed.xrootd import chown_tree
        chown_tree(Path(ep.data_dir), tape_grid.extra["service_user"])
    return ep.url + rel


def let_go(tape_grid, url: str) -> None:
    path = tape_grid.local_path(url)
    os.utime(path, (time.time() - 7200, time.time() - 7200))


@pytest.fixture(params=sorted(PROTOCOLS))
def tape(request) -> TapeOps:
    ops = capabilities_of(mover_for(f"{request.param}://localhost//data/x")).tape
    assert ops is not None, f"{request.param}: the mover has no TapeOps"
    return ops


def test_a_file_goes_from_disk_to_tape_to_offline_and_back(tape_grid, tape, tmp_path):
    assert tape_grid.endpoints["t1-tape"].tape_backed
    src = tmp_path / "f.dat"
    data = os.urandom(3 * 2**20)
    src.write_bytes(data)
    url = tape_grid.endpoints["t1-tape"].url + "life/f.dat"
    get_mover(f"file://{src}", url).copy(f"file://{src}", url, params=TransferParams())
    assert tape.archive_status([url])[url].residency is Residency.DISK_ONLY
    let_go(tape_grid, url)
    state = poll(lambda: tape.archive_status([url])[url], lambda s: s.on_tape)
    assert state.residency is Residency.ON_TAPE and state.online
    release = capabilities_of(tape).release
    assert release is not None
    release([url])
    state = poll(lambda: tape.archive_status([url])[url], lambda s: not s.online)
    assert state.residency is Residency.TAPE_ONLY
    assert not tape_grid.local_path(url).exists()
    rid = tape.bring_online([url], pin_lifetime_s=3600, timeout_s=60)
    assert rid
    state = poll(lambda: tape.stage_status([url], rid)[url], lambda s: s.online)
    assert state.residency is Residency.ON_TAPE
    assert zlib.adler32(tape_grid.local_path(url).read_bytes()) == zlib.adler32(data)


def test_missing_file_is_missing_and_a_path_outside_the_export_fails_the_request(tape_grid,
                                                                                 tape):
    base = tape_grid.endpoints["t1-tape"].url
    missing, foreign = base + "nope/x", base.replace("//data/", "//etc/") + "passwd"
    assert tape.archive_status([missing])[missing].residency is Residency.MISSING
    with pytest.raises(TransferError) as err:      # xrootd refuses the whole request
        tape.archive_status([missing, foreign])
    assert err.value.error_class is ErrorClass.PERMISSION


def test_status_of_200_files_takes_few_requests_not_one_per_file(tape_grid, tape):
    urls = [put(tape_grid, f"bulk/file{i:04d}.dat", b"x" * 10) for i in range(200)]
    cls = type(tape)
    first = cls.queries_sent
    got = tape.archive_status(urls)
    second = cls.queries_sent
    again = tape.archive_status(urls)
    third = cls.queries_sent
    assert set(got) == set(urls) == set(again)
    assert all(s.residency is Residency.DISK_ONLY for s in got.values())
    assert second - first < 40 and third - second <= 12, (second - first, third - second)


def test_a_server_without_a_tape_back_end_is_one_clear_error(tape_grid, tape):
    url = tape_grid.endpoints["t1-disk"].url + "f.dat"
    with pytest.raises(TransferError) as err:
        tape.archive_status([url])
    assert "\n" not in str(err.value) and "t1-disk" not in str(err.value)
    print(err.value)
