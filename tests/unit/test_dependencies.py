"""Every package setup.cfg declares is imported by src/ (a dependency is used, or dropped)."""
from __future__ import annotations

import ast
import configparser
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULE = {"PyYAML": "yaml", "zlib-ng": "zlib_ng", "PyJWT": "jwt"}   # distribution -> import


def test_every_declared_dependency_is_imported():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    declared = [re.split(r"[<>=\[ ;]", line.strip(), maxsplit=1)[0]
                for line in cfg["options"]["install_requires"].splitlines() if line.strip()]
    imported: set[str] = set()
    for path in (ROOT / "src").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    unused = [d for d in declared if MODULE.get(d, d.lower()) not in imported]
    assert declared and not unused, f"declared in setup.cfg, never imported: {unused}"
