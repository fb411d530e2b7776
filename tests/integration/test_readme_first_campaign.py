"""README's "Your first campaign", as written, on the session's loopback testbed: its seeding
line (gridxfer copy to an endpoint name), its campaign file and its commands."""
from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from gridxfer.cli.main import main

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"


def _section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Your first campaign")
    return text[start:text.index("\n## ", start + 3)]


def _gridxfer_lines(block: str) -> list[list[str]]:
    return [shlex.split(ln.split("  #")[0])[1:] for ln in block.splitlines()
            if ln.startswith("gridxfer ")]


def test_the_first_campaign_works_as_written(local_grid, local_grid_home, tmp_path, capsys):
    section = _section()
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, re.S)
    setup, yaml_text, commands = blocks[0][1], blocks[1][1], blocks[2][1]
    assert blocks[1][0] == "yaml"

    seed = tmp_path / "gx-seed"                         # the README's ~/gx-seed, smaller
    seed.mkdir()
    for i in range(1, 9):
        (seed / f"run{i}.dat").write_bytes(os.urandom(200_000 + i))
    copy = next(argv for argv in _gridxfer_lines(setup) if argv[0] == "copy")
    argv = [a for a in copy if a != "~/gx-seed/*.dat"]
    assert len(argv) == len(copy) - 1, copy
    argv[1:1] = sorted(str(p) for p in seed.iterdir())
    assert main(argv) == 0, capsys.readouterr().err

    spec = tmp_path / "first.yaml"
    spec.write_text(yaml_text)
    for argv in _gridxfer_lines(commands):
        argv = [str(spec) if a == "first.yaml" else a for a in argv]
        if argv[:2] == ["campaign", "run"] and "--dry-run" not in argv:
            argv.insert(2, "--quiet")
        assert main(argv) == 0, (argv, capsys.readouterr())
    out = capsys.readouterr().out
    assert "16 done files checked: 16 match" in out       # 8 files x 2 tiers
