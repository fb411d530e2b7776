"""A worker's bundle of small local files to root:// in one native call
(movers/xrootd/bundle.py, ``gx_upload_many``; engine/bundles.py) on a real xrootd: each
copy keeps ``XRootDMover.copy``'s contract, a link out of the source directory is refused
where the file is opened (C++) as where Python reads it, a stop ends what has not begun,
and a campaign of small files really goes through it, every file verified."""
from __future__ import annotations

import os
import sqlite3
import zlib
from pathlib import Path

import pytest

from gridxfer.cli.main import main
from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import CancelFlag, TransferParams
from gridxfer.movers.registry import get_mover
from gridxfer.movers.xrootd import relaynative
from gridxfer.movers.xrootd.mover import XRootDMover
from gridxfer.movers.xrootd.upload import CHUNK
from gridxfer.testbed import localgrid
from tests.integration.test_xrootd_relay import Pair, adler
from tests.integration.test_xrootd_relaynative import wait_no_jobs

pytestmark = pytest.mark.integration

CANARY = b"CANARY: outside the source directory\n"


@pytest.fixture
def calls(monkeypatch):
    """The native bundle calls made, each as its number of uploads."""
    assert relaynative.available(), "libgxrelay.so is not built: make native"
    seen: list[int] = []
    real = relaynative.upload_many

    def counted(entries, stop):
        seen.append(len(entries))
        return real(entries, stop)

    monkeypatch.setattr(relaynative, "upload_many", counted)
    return seen


def source(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (tmp_path / "secret").write_bytes(CANARY)
    os.symlink(tmp_path / "secret", src / "link.dat")
    return src


def test_each_copy_of_a_bundle_keeps_the_copy_contract(local_grid, tmp_path, calls):
    area = Pair(local_grid)
    src = source(tmp_path)
    data = {"a.dat": os.urandom(100), "b.dat": os.urandom(3000), "empty.dat": b"",
            "big.dat": os.urandom(CHUNK + 1), "exists.dat": b"new", "sum.dat": b"sum"}
    for name, body in data.items():
        (src / name).write_bytes(body)
    old = b"the destination's own bytes"
    localgrid.put_local(local_grid, area.dst_ep, area.sub + "out/exists.dat", old)
    existing = area.disk(area.dst("exists.dat"))
    base = f"file://{src}/"
    names = [*data, "link.dat"]

    def params(name: str) -> TransferParams:
        return TransferParams(timeout=60, verify="both", source_base=base,
                              expected_checksum="0x1" if name == "sum.dat" else None)

    mover = get_mover(base + "a.dat", area.dst("a.dat"))
    assert isinstance(mover, XRootDMover)
    got = mover.copy_many([(base + n, area.dst(n), params(n)) for n in names])
    by = dict(zip(names, got, strict=True))
    assert calls == [len(names)]         # one native call; big.dat then went alone
    for name in ("a.dat", "b.dat", "empty.dat", "big.dat"):
        c = by[name]
        assert c.error is None, (name, c.error)
        assert c.outcome.checksum == adler(data[name]) and c.outcome.bytes == len(data[name])
        assert area.disk(area.dst(name)).read_bytes() == data[name]
        assert 0 <= c.started <= c.ended
    assert by["a.dat"].ended <= by["b.dat"].started     # one after the other
    assert by["link.dat"].error.error_class is ErrorClass.BAD_NAME
    assert "resolves outside" in str(by["link.dat"].error)
    assert not area.disk(area.dst("link.dat")).exists()
    assert by["exists.dat"].error.error_class is ErrorClass.EXISTS
    assert existing.read_bytes() == old
    assert by["sum.dat"].error.error_class is ErrorClass.CHECKSUM
    assert not area.disk(area.dst("sum.dat")).exists()
    wait_no_jobs(relaynative.library())


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_a_link_out_of_the_source_is_refused_by_copy_too(local_grid, tmp_path, monkeypatch,
                                                         native):
    """``copy`` alone (a bundle of one, a larger file, no native library) confines its
    source as well: the engine no longer resolves links before a copy to root://."""
    if not native:
        monkeypatch.setattr(relaynative, "functions", None)
    area = Pair(local_grid)
    src = source(tmp_path)
    mover = get_mover(f"file://{src}/link.dat", area.dst("link.dat"))
    with pytest.raises(TransferError) as err:
        mover.copy(f"file://{src}/link.dat", area.dst("link.dat"),
                   params=TransferParams(timeout=60, source_base=f"file://{src}/"))
    assert err.value.error_class is ErrorClass.BAD_NAME, err.value
    assert not area.disk(area.dst("link.dat")).exists()
    # without source_base (gridxfer copy of one named file) the link is followed
    out = mover.copy(f"file://{src}/link.dat", area.dst("link.dat"),
                     params=TransferParams(timeout=60))
    assert out.bytes == len(CANARY)


def test_a_stop_ends_the_copies_not_yet_begun(local_grid, tmp_path, calls):
    area = Pair(local_grid)
    src = tmp_path / "src"
    src.mkdir()
    for i in range(3):
        (src / f"f{i}").write_bytes(b"x" * 10)
    stop = CancelFlag()
    stop.set()
    base = f"file://{src}/"
    mover = get_mover(base + "f0", area.dst("f0"))
    got = mover.copy_many([(base + f"f{i}", area.dst(f"f{i}"),
                            TransferParams(timeout=60, source_base=base)) for i in range(3)],
                          stop=stop)
    assert [(c.error.error_class, str(c.error)) for c in got] == \
        [(ErrorClass.CANCELLED, "cancelled: cancelled before it started")] * 3
    assert not any(area.disk(area.dst(f"f{i}")).exists() for i in range(3))


def test_a_campaign_of_small_files_copies_its_bundles_in_one_call(local_grid, tmp_path,
                                                                  gridxfer_home, calls):
    src = source(tmp_path)
    files = {f"d{i % 3}/f{i:03d}.dat": os.urandom(64 + i) for i in range(300)}
    for name, body in files.items():
        (src / name).parent.mkdir(exist_ok=True)
        (src / name).write_bytes(body)
    area = Pair(local_grid)
    spec = tmp_path / "c.yaml"
    spec.write_text(
        f'campaign: bundles\nsource: {{url: "file://{src}/", files: {{recursive: true}}}}\n'
        f'destinations:\n  - {{tier: T1, pool: ["{area.dst("")}"], max_active: 2}}\n'
        "checksum: {algorithm: adler32, verify: both}\nretries: {max: 0}\n", encoding="utf-8")
    assert main(["campaign", "run", "--quiet", str(spec)]) == 3     # the link failed
    conn = sqlite3.connect(gridxfer_home / "campaigns" / "bundles.sqlite")
    rows = {n: (s, e, c) for n, s, e, c in conn.execute(
        "SELECT name, state, error_class, checksum FROM files")}
    assert rows.pop("link.dat")[:2] == ("failed", "bad_name")
    assert all(s == "done" for s, _, _ in rows.values()) and len(rows) == len(files)
    for name, body in files.items():
        assert (Path(area.disk(area.dst(name)))).read_bytes() == body
        assert rows[name][2] == f"{zlib.adler32(body) & 0xFFFFFFFF:08x}"
    assert not area.disk(area.dst("link.dat")).exists()
    assert calls and max(calls) > 1 and sum(calls) <= len(files) + 1
    # each file has its own times, not its bundle's
    spans = conn.execute("SELECT started, ended FROM attempts WHERE status = 'done'").fetchall()
    assert all(e >= s for s, e in spans)
    conn.close()
