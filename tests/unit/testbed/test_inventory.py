"""Inventory: name resolution, URL -> disk path mapping, JSON round trip, missing inventory."""
from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from gridxfer.errors import EXIT_ERROR
from gridxfer.testbed.inventory import (Endpoint, Inventory, TestbedError, inventory_path,
                                        load_inventory, remove_inventory, save_inventory)


def make_inventory(tmp_path: Path) -> Inventory:
    eps = {
        "t0-xrd": Endpoint("t0-xrd", "root://127.0.0.1:1094//data/", "root", "T0",
                           str(tmp_path / "t0-xrd/data"), 101, "/log/x", kind="xrootd", port=1094),
        "t1-gsi": Endpoint("t1-gsi", f"gsiftp://localhost:2811{tmp_path}/t1-gsi/data/",
                           "gsiftp", "T1",
                           str(tmp_path / "t1-gsi/data"), 102, "/log/g", kind="gsiftp", port=2811),
        "t1-ftp": Endpoint("t1-ftp", f"ftp://127.0.0.1:2812{tmp_path}/t1-ftp/data/", "ftp", "T1",
                           str(tmp_path / "t1-ftp/data"), 103, "/log/f", kind="ftp", port=2812,
                           throttle=None, size_limit=1 << 20),
    }
    return Inventory(mode="local", endpoints=eps, env={"X509_CERT_DIR": "/ca/certs"},
                     base_dir=str(tmp_path), pids={n: e.pid for n, e in eps.items()})


def test_resolve_names_subpaths_and_urls(tmp_path):
    inv = make_inventory(tmp_path)
    assert inv.resolve("t0-xrd") == "root://127.0.0.1:1094//data/"
    assert inv.resolve("t0-xrd/raw/f.root") == "root://127.0.0.1:1094//data/raw/f.root"
    assert inv.resolve("gsiftp://elsewhere:1/x") == "gsiftp://elsewhere:1/x"
    with pytest.raises(TestbedError, match="unknown testbed endpoint 'nope'.*t0-xrd"):
        inv.resolve("nope/f")


def test_local_path_maps_urls_of_every_protocol(tmp_path):
    inv = make_inventory(tmp_path)
    assert (
        inv.local_path("root://127.0.0.1:1094//data/a/b.root") == tmp_path / "t0-xrd/data/a/b.root"
    )
    assert inv.local_path("root://localhost:1094//data/a") == tmp_path / "t0-xrd/data/a"
    assert inv.local_path("root://127.0.0.1:1094/data/a") == tmp_path / "t0-xrd/data/a"
    assert inv.local_path(inv.resolve("t1-gsi/x/y")) == tmp_path / "t1-gsi/data/x/y"
    assert (
        inv.local_path(f"gsiftp://127.0.0.1:2811{tmp_path}/t1-gsi/data/z")
        == tmp_path / "t1-gsi/data/z"
    )
    assert inv.local_path(inv.resolve("t1-ftp/z")) == tmp_path / "t1-ftp/data/z"
    assert inv.local_path(inv.resolve("t1-ftp")) == tmp_path / "t1-ftp/data"


@pytest.mark.parametrize("url", [
    "root://127.0.0.1:1095//data/a",            # other port
    "root://127.0.0.1:1094//other/a",           # outside the data area
    "gsiftp://127.0.0.1:1094//data/a",          # other protocol on that port
    "gsiftp://localhost:2811/etc/passwd",
    "file:///tmp/x",
])
def test_local_path_is_none_off_the_endpoints(tmp_path, url):
    assert make_inventory(tmp_path).local_path(url) is None


def test_save_load_round_trip_is_readable_private_json(tmp_path, gridxfer_home):
    inv = make_inventory(tmp_path)
    path = save_inventory(inv)
    assert path == inventory_path() == gridxfer_home / "testbed" / "inventory.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    raw = json.loads(path.read_text())
    assert raw["endpoints"]["t0-xrd"]["url"] == "root://127.0.0.1:1094//data/"
    assert raw["mode"] == "local"
    assert load_inventory() == inv
    assert load_inventory().client_env() == {"X509_CERT_DIR": "/ca/certs"}


def test_missing_or_broken_inventory_is_a_clear_error(gridxfer_home):
    remove_inventory()
    with pytest.raises(TestbedError, match="no testbed is up") as err:
        load_inventory()
    assert err.value.exit_code == EXIT_ERROR
    inventory_path().write_text("{not json")
    with pytest.raises(TestbedError, match="unreadable testbed inventory"):
        load_inventory()
    remove_inventory()
    remove_inventory()     # idempotent
