"""`gridxfer --version`: the version, and whether small XRootD files take the native relay
(built, switched off, or not built), told without loading the library."""
from __future__ import annotations

from click.testing import CliRunner

from gridxfer import __version__
from gridxfer.cli.main import cli
import gridxfer.movers.xrootd as xrootd_pkg


def _version(env: dict[str, str] | None = None) -> list[str]:
    res = CliRunner().invoke(cli, ["--version"], env=env)
    assert res.exit_code == 0, res.output
    return res.output.splitlines()


def test_version_names_the_native_relay_as_built(monkeypatch, tmp_path):
    lib = tmp_path / "libgxrelay.so"
    lib.write_bytes(b"")
    monkeypatch.setattr(xrootd_pkg, "NATIVE_LIBRARY", lib)
    lines = _version({"GRIDXFER_XRD_NATIVE": "1"})
    assert lines == [f"gridxfer, version {__version__}",
                     f"native relay (libgxrelay.so): built ({lib})"]


def test_version_says_switched_off_and_not_built(monkeypatch, tmp_path):
    lib = tmp_path / "libgxrelay.so"
    lib.write_bytes(b"")
    monkeypatch.setattr(xrootd_pkg, "NATIVE_LIBRARY", lib)
    assert _version({"GRIDXFER_XRD_NATIVE": "0"})[1].endswith(
        "built, switched off (GRIDXFER_XRD_NATIVE=0)")
    monkeypatch.setattr(xrootd_pkg, "NATIVE_LIBRARY", tmp_path / "absent.so")
    assert _version()[1].endswith("not built (make native): small files take the Python relay")
