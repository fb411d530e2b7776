from __future__ import annotations

import pytest


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A private $GRIDXFER_HOME and sysctl.d directory; the test runs in tmp_path."""
    h = tmp_path / "gxhome"
    h.mkdir()
    monkeypatch.setenv("GRIDXFER_HOME", str(h))
    monkeypatch.setenv("GRIDXFER_SYSCTL_DIR", str(tmp_path / "sysctl.d"))
    monkeypatch.chdir(tmp_path)
    return h
