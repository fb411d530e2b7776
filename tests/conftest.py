"""Shared fixtures. Paths come from fixtures, never from globals."""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import pytest


def pytest_configure(config):
    """Every namespace and root-namespace link a test grid creates carries this run's tag
    (gridxfer.testbed.netgrid): a second `make test` at the same time builds its own."""
    os.environ.setdefault("GRIDXFER_NS_TAG", str(os.getpid()))


@contextlib.contextmanager
def _machine_lock(name: str):
    """An flock shared by every test run on this machine (it dies with the process)."""
    import fcntl
    lock_dir = Path("/run/lock") if Path("/run/lock").is_dir() else Path(tempfile.gettempdir())
    with open(lock_dir / f"gridxfer-test-{name}.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


@pytest.fixture
def controller_grid_lock():
    """A topology with ``controller:`` attaches this machine: its tier subnets are routed in
    the root namespace, which a second test run at the same time shares (the run tag keeps
    names apart, not routes). One such grid per machine at a time."""
    with _machine_lock("controller-grid"):
        yield


@pytest.fixture
def host_sysctl_lock():
    """For a test that writes a host-wide sysctl (and restores it) or asserts that one did
    not change: a second test run at the same time would see, or save and "restore", the
    other's temporary value."""
    with _machine_lock("host-sysctl"):
        yield


@pytest.fixture(autouse=True)
def _restore_environ():
    """Every test leaves os.environ as it found it. An in-process campaign on a testbed
    applies that testbed's client env (X509_*); without this, a grid torn down by one test
    would leave later tests pointing at its deleted CA and proxy."""
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def gridxfer_home(tmp_path, monkeypatch):
    """A private $GRIDXFER_HOME for one test."""
    home = tmp_path / "gxhome"
    home.mkdir()
    monkeypatch.setenv("GRIDXFER_HOME", str(home))
    return home


# --- embedded local grid (real XRootD / GSI GridFTP / anonymous GridFTP servers) -------------
# One test CA + user proxy per session, shared by every grid of the session: XrdCl and
# gfal2 read X509_* (and XRD_*) from the environment once per process, so the client env
# must not change between grids.

import dataclasses  # noqa: E402
import shutil  # noqa: E402


@contextlib.contextmanager
def _gridxfer_home_env(home):
    old = os.environ.get("GRIDXFER_HOME")
    os.environ["GRIDXFER_HOME"] = str(home)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("GRIDXFER_HOME", None)
        else:
            os.environ["GRIDXFER_HOME"] = old


@pytest.fixture(scope="session")
def grid_ca():
    """The session's test CA (GsiFiles); client env vars are set in os.environ for the session."""
    from gridxfer.testbed import ca, localgrid
    from gridxfer.testbed.xrootd import ensure_user

    ca_dir = tempfile.mkdtemp(prefix="gridxfer-grid-ca-")
    os.chmod(ca_dir, 0o755)
    gsi = ca.make_test_ca(ca_dir, local_user=ensure_user())
    saved = {k: os.environ.get(k) for k in localgrid.client_env(gsi)}
    os.environ.update(localgrid.client_env(gsi))
    try:
        yield gsi
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(ca_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def local_grid(tmp_path_factory, grid_ca):
    """The default local grid (t0-xrd, t0-gsiftp, t1a-xrd1, t1a-xrd2, t1a-gsiftp, t1b-xrd,
    t1b-ftp), up for the whole session under its own $GRIDXFER_HOME. Yields the Inventory.
    Tests that need endpoint-name resolution through $GRIDXFER_HOME use `local_grid_home`."""
    from gridxfer.testbed import localgrid

    home = tmp_path_factory.mktemp("localgrid-home")
    with _gridxfer_home_env(home):
        try:
            inv = localgrid.up(localgrid.LocalGridSpec(gsi=grid_ca, owner_pid=os.getpid()))
        except BaseException:
            localgrid.down()
            raise
    try:
        yield inv
    finally:
        with _gridxfer_home_env(home):
            localgrid.down()


@pytest.fixture
def local_grid_home(local_grid, gridxfer_home):
    """A private $GRIDXFER_HOME for one test that contains the session grid's inventory
    (so `load_inventory()` / endpoint names work). Do not call `testbed down` in it."""
    from gridxfer import state
    from gridxfer.testbed.inventory import INVENTORY_NAME

    state.write_json(gridxfer_home / "testbed" / INVENTORY_NAME, local_grid.to_json())
    return gridxfer_home


@pytest.fixture
def make_grid(tmp_path, grid_ca):
    """Factory for a custom grid torn down at test end:

        inv = make_grid([ServerSpec("slow", "xrootd", "T1", throttle=2e6)])
        inv = make_grid(LocalGridSpec(servers=(...)))

    Each call gets its own $GRIDXFER_HOME (tmp_path/gridN) and shares the session CA."""
    from gridxfer.testbed import localgrid

    homes = []

    def _make(spec):
        if not isinstance(spec, localgrid.LocalGridSpec):
            spec = localgrid.LocalGridSpec(servers=tuple(spec))
        spec = dataclasses.replace(spec, gsi=spec.gsi or grid_ca, owner_pid=os.getpid())
        home = tmp_path / f"grid{len(homes)}"
        home.mkdir()
        homes.append(home)
        with _gridxfer_home_env(home):
            return localgrid.up(spec)

    yield _make
    for home in homes:
        with _gridxfer_home_env(home):
            localgrid.down()


@pytest.fixture(autouse=True)
def _thread_signal_mask_kept():
    """No test leaves pytest's thread with signals blocked (gfal2's first context blocks
    nearly every signal in its thread): every later child would inherit the mask."""
    import signal
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    if signal.pthread_sigmask(signal.SIG_BLOCK, []) != before:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
