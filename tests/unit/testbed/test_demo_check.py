"""make demo's independent check: XRootD's own tools, with a fallback when the server
keeps failing the checksum query (real xrdfs and xrdadler32; the server is unreachable)."""
from __future__ import annotations

import os
import zlib
from pathlib import Path

import pytest

from gridxfer.testbed import demo


class _Inv:
    def __init__(self, path: Path | None) -> None:
        self.path = path

    def local_path(self, url: str) -> Path | None:
        return self.path


@pytest.fixture
def quick_xrdcl(monkeypatch):
    monkeypatch.setenv("XRD_CONNECTIONWINDOW", "1")
    monkeypatch.setenv("XRD_CONNECTIONRETRY", "1")
    monkeypatch.setattr(demo.time, "sleep", lambda s: None)


def test_failed_server_query_falls_back_to_xrdadler32_on_the_servers_file(tmp_path, quick_xrdcl,
                                                                          capsys):
    data = os.urandom(300_000)
    f = tmp_path / "run0001.root"
    f.write_bytes(data)
    got = demo.independent_checksum(_Inv(f), "root://127.0.0.1:1//data/run0001.root")
    assert got == f"{zlib.adler32(data) & 0xFFFFFFFF:08x}"
    out = capsys.readouterr().out
    assert out.count("xrdfs 127.0.0.1:1 query checksum") == 3          # asked three times
    assert "falling back to xrdadler32" in out


def test_without_a_local_file_a_failed_query_stops_the_demo(quick_xrdcl):
    with pytest.raises(SystemExit, match="independent check failed"):
        demo.independent_checksum(_Inv(None), "root://127.0.0.1:1//data/run0001.root")


@pytest.mark.parametrize("layout", [demo.LOCAL, demo.NETNS])
def test_the_demo_campaign_has_one_tape_tier_with_archive(layout, tmp_path):
    assert layout.tape_tier in layout.tiers
    path = tmp_path / "c.yaml"
    demo.write_campaign(path, layout, tmp_path / "token")
    text = path.read_text()
    assert text.count("archive: {timeout: 30m}") == 1
    pool = layout.tiers[layout.tape_tier][0]
    block = text.split(f"tier: {layout.tape_tier}\n", 1)[1]
    assert block.splitlines()[0].strip() == f"pool: [{', '.join(pool)}]"
    assert "archive:" in block.split("  - tier:", 1)[0]
    assert "token:" not in block.split("  - tier:", 1)[0]
