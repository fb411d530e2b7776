"""Shared fixtures. Paths come from fixtures, never from globals."""
from __future__ import annotations

import pytest


@pytest.fixture
def gridxfer_home(tmp_path, monkeypatch):
    """A private $GRIDXFER_HOME for one test."""
    home = tmp_path / "gxhome"
    home.mkdir()
    monkeypatch.setenv("GRIDXFER_HOME", str(home))
    return home
