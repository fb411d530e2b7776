"""movers/onecopy: arguments to URLs, -K and --checksum-mode, directory destinations, and a
local copy through the registry's mover (no servers)."""
from __future__ import annotations

import os
import zlib

import pytest

from gridxfer.errors import UsageError
from gridxfer.movers import onecopy
from gridxfer.movers.base import TransferParams


def test_paths_become_file_urls_never_decoded(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert onecopy.to_url("a%20b?c#d") == f"file://{tmp_path}/a%20b?c#d"
    assert onecopy.to_url("out/") == f"file://{tmp_path}/out/"
    assert onecopy.to_url("root://h//d/f") == "root://h//d/f"
    for bad in ("root://u:pw@h//f", "root:///f", ""):
        with pytest.raises(UsageError):
            onecopy.to_url(bad)


@pytest.mark.parametrize("bad", ["root://[::1/x", "gsiftp://[zz]/x", "davs://[::1/x",
                                 "root://h:99999//x", "root://h:abc//x"])
def test_a_malformed_host_or_port_is_a_usage_error_not_a_traceback(bad):
    with pytest.raises(UsageError, match=r"^not a URL: "):
        onecopy.to_url(bad)


@pytest.mark.parametrize("k,mode,want", [
    (None, "both", ("adler32", "both", None)),
    ("ADLER32", "target", ("adler32", "destination", None)),
    ("adler32:0xABC", "source", ("adler32", "source", "00000abc")),
    (None, "none", (None, "none", None)),
])
def test_checksum_options(k, mode, want):
    assert onecopy.checksum_params(k, mode) == want


@pytest.mark.parametrize("k,mode", [("md5", "both"), ("adler32:xyz", "both"),
                                    ("adler32:123456789", "both"), ("adler32:1", "none"),
                                    (None, "sideways")])
def test_bad_checksum_options(k, mode):
    with pytest.raises(UsageError):
        onecopy.checksum_params(k, mode)


def test_directory_destinations(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    a, b = f"file://{tmp_path}/a b", f"file://{tmp_path}/c"
    assert onecopy.destinations([a], f"file://{d}") == [(a, f"file://{d}/a b")]
    assert onecopy.destinations([a], "gsiftp://h/x/") == [(a, "gsiftp://h/x/a%20b")]
    assert onecopy.destinations([a], f"file://{tmp_path}/new") == [(a, f"file://{tmp_path}/new")]
    with pytest.raises(UsageError, match="directory destination"):
        onecopy.destinations([a, b], f"file://{tmp_path}/new")


def test_local_copy_verifies_and_refuses_an_existing_destination(tmp_path):
    data = os.urandom(50_000)
    (tmp_path / "s").write_bytes(data)
    src, dst = f"file://{tmp_path}/s", f"file://{tmp_path}/t"
    r = onecopy.copy_one(src, dst, TransferParams())
    assert r.ok and r.checksum == f"{zlib.adler32(data):08x}" and r.bytes == len(data)
    again = onecopy.copy_one(src, dst, TransferParams())
    assert (again.ok, again.error_class) == (False, "exists")
    dry = onecopy.dry_run_one(src, f"file://{tmp_path}/u", TransferParams())
    assert dry.ok and dry.dry_run and not (tmp_path / "u").exists()
    assert sorted(os.listdir(tmp_path)) == ["s", "t"]
