"""The shared integrity path on local files: temp name, verify, rename, cleanup."""
from __future__ import annotations

import os
import zlib
from urllib.parse import unquote

import pytest

from gridxfer.errors import ErrorClass, TransferError, UsageError
from gridxfer.movers.base import TransferParams, normalise_adler32
from gridxfer.movers.integrity import verified_copy
from gridxfer.movers.ops import LocalOps, adler32_file
from gridxfer.movers import names
from gridxfer.movers.urls import (NAME_MAX, TEMP_MARK, TOKEN_MAX, is_temp_name, local_path,
                                  scheme_of, split_dir, temp_stem, temp_url, url_path,
                                  with_user)


def test_url_helpers():
    assert scheme_of("xroot://h//f") == "root" and scheme_of("/a/b") == "file"
    assert url_path("root://h:1//data/f") == "/data/f"
    assert local_path("file:///tmp/x") == "/tmp/x" and local_path("/tmp/x") == "/tmp/x"
    with pytest.raises(UsageError):
        local_path("file://otherhost/tmp/x")
    assert split_dir("gsiftp://h/d/f.dat") == ("gsiftp://h/d/", "f.dat")
    tmp = temp_url("root://h:1//d/f.dat")
    assert tmp.startswith("root://h:1//d/.f.dat.gxpart-") and is_temp_name(tmp.rsplit("/", 1)[1])
    assert with_user("root://h:1//f", "gx0p1") == "root://gx0p1@h:1//f"
    assert with_user("root://u@h:1//f", "gx0p1") == "root://u@h:1//f"


def test_adler32_is_zero_padded(tmp_path):
    # this payload's adler32 is 0xf16035c: it must read "0f16035c", not "f16035c"
    data = b"gridxfer"
    (tmp_path / "f").write_bytes(data)
    value = zlib.adler32(data)
    assert adler32_file(str(tmp_path / "f")) == "0f16035c" == normalise_adler32(value)
    assert normalise_adler32("f16035c") == "0f16035c"
    assert normalise_adler32(hex(value)) == f"{value:08x}"


def _raw_writer(payload: bytes):
    def raw(src: str, tmp: str, progress=None):
        if progress:
            progress(len(payload), None)
        with open(local_path(tmp), "wb") as fh:
            fh.write(payload)
        return 1, "test"
    return raw


def test_verified_copy_renames_into_place(tmp_path):
    (tmp_path / "src").write_bytes(b"hello")
    ops = LocalOps()
    seen = []
    out = verified_copy(f"file://{tmp_path}/src", f"file://{tmp_path}/d/dst", TransferParams(),
                        src_ops=ops, dst_ops=ops, raw_copy=_raw_writer(b"hello"),
                        progress=lambda done, total: seen.append((done, total)))
    assert seen == [(5, 5)]                         # the total is filled in from the source size
    assert out.checksum == normalise_adler32(zlib.adler32(b"hello")) and out.bytes == 5
    assert os.listdir(tmp_path / "d") == ["dst"]


@pytest.mark.parametrize("payload,expected,cls", [
    (b"hellO", None, ErrorClass.CHECKSUM),          # corrupted in flight
    (b"hell", None, ErrorClass.CHECKSUM),           # truncated: size check
    (b"hello", "deadbeef", ErrorClass.CHECKSUM),    # catalogue checksum disagrees
])
def test_verified_copy_removes_bad_copies(tmp_path, payload, expected, cls):
    (tmp_path / "src").write_bytes(b"hello")
    ops = LocalOps()
    with pytest.raises(TransferError) as err:
        verified_copy(f"file://{tmp_path}/src", f"file://{tmp_path}/d/dst",
                      TransferParams(expected_checksum=expected),
                      src_ops=ops, dst_ops=ops, raw_copy=_raw_writer(payload))
    assert err.value.error_class is cls
    assert os.listdir(tmp_path / "d") == []


class _SlowChecksumOps(LocalOps):
    """Local ops whose checksum notes whether the copy was already running."""

    def __init__(self, copy_running) -> None:
        self.copy_running, self.overlapped = copy_running, None

    def checksum(self, url: str, algorithm: str = "adler32") -> str:
        self.overlapped = self.copy_running.wait(3)
        return super().checksum(url, algorithm)


@pytest.mark.parametrize("verify", ["both", "source", "destination"])
def test_source_checksum_runs_during_the_copy(tmp_path, verify):
    import threading
    (tmp_path / "src").write_bytes(b"hello")
    running = threading.Event()
    ops = _SlowChecksumOps(running)

    def raw(src, tmp, progress=None):
        running.set()
        return _raw_writer(b"hello")(src, tmp, progress)

    out = verified_copy(f"file://{tmp_path}/src", f"file://{tmp_path}/d/dst",
                        TransferParams(verify=verify), src_ops=ops, dst_ops=LocalOps(),
                        raw_copy=raw)
    assert ops.overlapped is True         # not computed before the copy started
    assert out.checksum == normalise_adler32(zlib.adler32(b"hello"))
    done = threading.Event()
    done.set()
    with pytest.raises(TransferError) as err:       # a source disagreeing with the catalogue
        verified_copy(f"file://{tmp_path}/src", f"file://{tmp_path}/d/dst2",
                      TransferParams(verify=verify, expected_checksum="deadbeef"),
                      src_ops=_SlowChecksumOps(done), dst_ops=LocalOps(),
                      raw_copy=_raw_writer(b"hello"))
    assert err.value.error_class is ErrorClass.CHECKSUM
    assert sorted(os.listdir(tmp_path / "d")) == ["dst"]


def test_verified_copy_refuses_existing_and_missing(tmp_path):
    (tmp_path / "src").write_bytes(b"hello")
    (tmp_path / "dst").write_bytes(b"old")
    ops = LocalOps()
    with pytest.raises(TransferError) as err:
        verified_copy(f"file://{tmp_path}/src", f"file://{tmp_path}/dst", TransferParams(),
                      src_ops=ops, dst_ops=ops, raw_copy=_raw_writer(b"hello"))
    assert err.value.error_class is ErrorClass.EXISTS and (tmp_path / "dst").read_bytes() == b"old"
    verified_copy(f"file://{tmp_path}/src", f"file://{tmp_path}/dst",
                  TransferParams(overwrite=True),
                  src_ops=ops, dst_ops=ops, raw_copy=_raw_writer(b"hello"))
    assert (tmp_path / "dst").read_bytes() == b"hello"
    with pytest.raises(TransferError) as err:
        verified_copy(f"file://{tmp_path}/nope", f"file://{tmp_path}/x", TransferParams(),
                      src_ops=ops, dst_ops=ops, raw_copy=_raw_writer(b""))
    assert err.value.error_class is ErrorClass.SOURCE_MISSING


def test_stale_spool_files_are_swept(tmp_path):
    from gridxfer.movers.spool import sweep_stale

    dead = 4_000_000  # above pid_max: no such process
    (tmp_path / f".gxspool-{dead}-abc").write_bytes(b"partial")
    (tmp_path / f".gxspool-{os.getpid()}-def").write_bytes(b"mine, in use")
    (tmp_path / "other").write_bytes(b"not ours")
    assert sweep_stale(str(tmp_path)) == [f".gxspool-{dead}-abc"]
    assert sorted(os.listdir(tmp_path)) == sorted([f".gxspool-{os.getpid()}-def", "other"])


def test_data_done_is_signalled_after_the_bytes_and_before_verification(tmp_path):
    (tmp_path / "src").write_bytes(b"hello")
    events: list[str] = []

    class Ops(LocalOps):
        def checksum(self, url, algorithm="adler32"):
            events.append("checksum " + ("tmp" if ".gxpart-" in url else "src"))
            return super().checksum(url, algorithm)

        def rename(self, src, dst):
            events.append("rename")
            super().rename(src, dst)

    def raw(src, tmp, progress=None):
        events.append("copy")
        return _raw_writer(b"hello")(src, tmp, progress)

    verified_copy(f"file://{tmp_path}/src", f"file://{tmp_path}/dst",
                  TransferParams(verify="destination", on_data_done=lambda: events.append("done")),
                  src_ops=LocalOps(), dst_ops=Ops(), raw_copy=raw)
    assert events.index("copy") < events.index("done") < events.index("checksum tmp") \
        < events.index("rename")


def _server_name(url: str) -> bytes:
    """The last component of ``url`` as the server's file system gets it (decoded)."""
    return unquote(url.rpartition("/")[2]).encode("utf-8", "surrogatepass")


@pytest.mark.parametrize("base", ["file:///d/", "root://h:1//d/", "gsiftp://h/d/",
                                  "davs://h/d/"])
@pytest.mark.parametrize("name", ["L" * 254, "L" * 255, "\u00e4" * 127, "a b" * 85,
                                  "x" * 200 + "\u00e4" * 27, "\u20ac" * 85, "f.dat"])
def test_the_temporary_name_of_any_name_up_to_name_max_fits(base, name):
    """A 254-character name once made '.<name>.gxpart-<token>' of 277 bytes: ENAMETOOLONG
    on every attempt. Long names get a shortened stem, cut between whole characters (never
    inside %XX or a UTF-8 sequence), with a hash of the name; short ones keep theirs."""
    dst = names.join_url(base, name)
    tmp = temp_url(dst, "a" * TOKEN_MAX)
    got = _server_name(tmp)
    assert len(got) <= NAME_MAX, (len(got), got)
    got.decode("utf-8")                                 # whole characters only
    assert is_temp_name(tmp.rpartition("/")[2])
    assert tmp.rpartition("/")[0] == dst.rpartition("/")[0]
    stem = temp_stem(dst.rpartition("/")[2])
    assert tmp.rpartition("/")[2] == f".{stem}{TEMP_MARK}{'a' * TOKEN_MAX}"
    if len(name.encode()) + 1 + len(TEMP_MARK) + TOKEN_MAX <= NAME_MAX:
        assert stem == dst.rpartition("/")[2]           # unchanged: most names
    else:
        assert unquote(name).startswith(unquote(stem.rpartition("~")[0]))


def test_long_names_that_begin_alike_keep_distinct_temporary_names():
    a, b = "L" * 240 + "a", "L" * 240 + "b"
    assert temp_stem(a) != temp_stem(b) and temp_stem(a) == temp_stem(a)
    assert temp_stem("short.dat") == "short.dat"
