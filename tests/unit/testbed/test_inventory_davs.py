"""The inventory's davs:// side: names, local paths, old inventories, refusals."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from gridxfer.errors import SpecError
from gridxfer.testbed.inventory import Endpoint, Inventory, TestbedError, load_inventory


def inventory(tmp_path, **extra) -> Inventory:
    ep = Endpoint(name="t1-xrd", url="root://127.0.0.1:4000//data/", protocol="root", tier="T1",
                  data_dir=str(tmp_path / "data"), pid=1, log="", kind="xrootd", port=4000,
                  davs_url="davs://127.0.0.1:4000/data/", davs_name="t1-davs", auth="ztn",
                  davs_auth="token", token_base="/data", **extra)
    return Inventory(mode="local", endpoints={"t1-xrd": ep}, env={}, base_dir=str(tmp_path))


def test_a_davs_name_resolves_to_the_davs_url(tmp_path):
    inv = inventory(tmp_path)
    assert inv.resolve("t1-davs/a/b.root") == "davs://127.0.0.1:4000/data/a/b.root"
    assert inv.resolve("t1-xrd/a") == "root://127.0.0.1:4000//data/a"
    with pytest.raises(TestbedError, match="known: t1-davs, t1-xrd"):
        inv.resolve("nope/x")


@pytest.mark.parametrize("url", ["davs://127.0.0.1:4000/data/a/f", "https://localhost:4000/data/a/f",
                                 "roots://127.0.0.1:4000//data/a/f", "root://127.0.0.1:4000//data/a/f"])
def test_local_path_of_every_url_of_the_server(tmp_path, url):
    assert inventory(tmp_path).local_path(url) == tmp_path / "data" / "a" / "f"


def test_an_inventory_written_before_davs_still_loads(tmp_path):
    obj = inventory(tmp_path).to_json()
    for key in ("davs_url", "davs_name", "auth", "davs_auth", "token_base"):
        del obj["endpoints"]["t1-xrd"][key]
    path = tmp_path / "inv.json"
    path.write_text(json.dumps(obj))
    inv = load_inventory(path)
    assert inv.endpoints["t1-xrd"].davs_url == "" and inv.resolve("t1-xrd/f").startswith("root://")


def test_a_credential_in_a_davs_url_is_refused(tmp_path):
    obj = inventory(tmp_path).to_json()
    obj["endpoints"]["t1-xrd"]["davs_url"] = "davs://h:1/data/?authz=hunter2"
    path = Path(tmp_path / "inv.json")
    path.write_text(json.dumps(obj))
    with pytest.raises(SpecError, match="endpoints.t1-xrd.davs_url") as exc:
        load_inventory(path)
    assert "hunter2" not in str(exc.value)
