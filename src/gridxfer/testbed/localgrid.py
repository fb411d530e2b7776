"""The embedded local grid: real XRootD and GridFTP (GSI + anonymous) servers on loopback.

API::

    up(spec: LocalGridSpec | None = None) -> Inventory    # TestbedError if a grid is already up
    down() -> None        # kill every server (and its children), unmount, forget; idempotent
    status() -> dict      # {"mode", "up", "base_dir", "endpoints": {name: {url, alive, pid, ...}}}
    put_local(inv, "t0-xrd", "raw/f1.root", data) -> url  # a file on disk, owned by the server user
    stop_server(inv, "t1b-xrd")       # kill one server: an unreachable endpoint
    gsi_of(inv) -> GsiFiles           # the grid's test CA (issue more host certs)
    client_env(gsi) -> dict           # X509_CERT_DIR, X509_USER_PROXY, GFAL_PYTHONBIN, ...

The default spec is a T0, two T1 tiers using both protocols and a tape-backed T1
(``t1-tape``, tier T1T: testbed/tapexrd.py) (see DEFAULT_SERVERS in
:mod:`gridxfer.testbed.gridspec`); every xrootd also serves davs:// (:mod:`.xrdhttp`).
Server files live in a world-traversable ``base_dir`` (``/tmp/gridxfer-grid-XXXX`` unless
``$GRIDXFER_TESTBED_DIR`` names another parent), because the servers run as the
unprivileged ``gridxfer`` user and ``$GRIDXFER_HOME`` is private (0700). The pointer to
``base_dir`` is written to ``$GRIDXFER_HOME/testbed/local.json`` before the first server
starts, so ``down`` works even after ``up`` was killed -9 half-way.
"""
from __future__ import annotations

import contextlib
import functools
import os
import tempfile
from pathlib import Path

from gridxfer import state
from gridxfer.testbed import ca as ca_mod
from gridxfer.testbed import inventory as inv_mod
from gridxfer.testbed import tokens as tok_mod
from gridxfer.testbed.gridftp import check_gsi_login, start_gridftp
from gridxfer.testbed.tapexrd import start_tape_xrootd
from gridxfer.testbed.inventory import Endpoint, Inventory, TestbedError
from gridxfer.testbed.gridspec import (
    AUTH_SERVERS,
    DEFAULT_SERVERS,
    LocalGridSpec,
    ServerSpec,
    check_spec,
)
from gridxfer.testbed.procs import alive, matching_procs, pidfile_procs, run_quiet, terminate, tree
from gridxfer.testbed.xrdhttp import XrdSecurity
from gridxfer.testbed.xrootd import chown_tree, ensure_user, start_xrootd

__all__ = ["AUTH_SERVERS", "DEFAULT_SERVERS", "LocalGridSpec", "ServerSpec", "client_env", "down",
           "gsi_of", "put_local", "status", "stop_server", "up"]
POINTER = "local.json"


def client_env(gsi: ca_mod.GsiFiles | None) -> dict[str, str]:
    """What gfal2 / XrdCl / globus-url-copy need to talk to this grid."""
    return {**(gsi.client_env() if gsi else {}),
            # gfal-copy & co. pick the first `python` on PATH that imports gfal2; a pyenv
            # or venv python without the Debian bindings makes them fail with 127.
            "GFAL_PYTHONBIN": "/usr/bin/python3",
            "GLOBUS_USAGE_OPTOUT": "1",
            # XrdCl's defaults (ConnectionWindow 120 s x ConnectionRetry 5) make a refused
            # connection to a stopped server hang for ~10 min; on loopback fail in seconds.
            "XRD_CONNECTIONWINDOW": "3",
            "XRD_CONNECTIONRETRY": "2"}


def _pointer() -> Path:
    return inv_mod.testbed_dir() / POINTER


def _running(inv: Inventory) -> list[str]:
    return [name for name, ep in inv.endpoints.items() if alive(ep.pid)]


def up(spec: LocalGridSpec | None = None) -> Inventory:
    """Start the servers of ``spec`` (default grid), write and return the inventory."""
    spec = spec or LocalGridSpec()
    check_spec(spec)
    if inv_mod.inventory_path().exists():
        old = inv_mod.load_inventory()
        if old.mode != "local":
            raise TestbedError(
                f"a {old.mode} testbed inventory exists ({inv_mod.inventory_path()}); "
                "run `gridxfer testbed down` first"
            )
        running = _running(old)
        if running:
            raise TestbedError(
                f"a {old.mode} testbed is already up ({len(running)} servers running, "
                f"inventory {inv_mod.inventory_path()}); run `gridxfer testbed down` first"
            )
        down()
    elif _pointer().exists():
        down()  # left-overs of an `up` that was killed half-way
    parent = Path(
        spec.base_parent or os.environ.get("GRIDXFER_TESTBED_DIR") or tempfile.gettempdir()
    )
    parent.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="gridxfer-grid-", dir=parent))
    os.chmod(base, 0o755)
    state.write_json(_pointer(), {"base_dir": str(base), "mounts": []})
    try:
        if spec.owner_pid:
            _start_reaper(spec.owner_pid)
        return _start(spec, base)
    except BaseException:
        down()
        raise


def _start(spec: LocalGridSpec, base: Path) -> Inventory:
    user = ensure_user()
    gsi = spec.gsi
    if gsi is None and any(s.kind in ("gsiftp", "xrootd") for s in spec.servers):
        gsi = ca_mod.make_test_ca(base / "ca", local_user=user)
    issuer_dir = ""
    if any(s.kind == "xrootd" for s in spec.servers):
        issuer_dir = str(base / "issuer")
        tok_mod.make_issuer(Path(issuer_dir))
    env = {**client_env(gsi), **spec.extra_env}
    mounts: list[str] = []
    endpoints: dict[str, Endpoint] = {}
    for s in spec.servers:
        sdir = base / s.name
        (sdir / "data").mkdir(parents=True)
        if s.size_limit:
            _mount_tmpfs(sdir / "data", s.size_limit)
            mounts.append(str(sdir / "data"))
            state.write_json(_pointer(), {"base_dir": str(base), "mounts": mounts})
            chown_tree(sdir / "data", user)
        endpoints[s.name] = _start_server(s, sdir, gsi, _security(s, gsi, issuer_dir, user))
    first_gsi = next((ep for ep in endpoints.values() if ep.kind == "gsiftp"), None)
    if first_gsi is not None:
        check_gsi_login(first_gsi, env)
    inv = Inventory(mode="local", endpoints=endpoints, env=env, base_dir=str(base),
                    pids={n: ep.pid for n, ep in endpoints.items()}, mounts=tuple(mounts),
                    extra={"gsi": _gsi_json(gsi), "service_user": user, "issuer": issuer_dir})
    inv_mod.save_inventory(inv)
    return inv


def _security(s: ServerSpec, gsi: ca_mod.GsiFiles | None, issuer_dir: str,
              user: str) -> XrdSecurity | None:
    """TLS (davs://) for every xrootd, and its authentication (ServerSpec.auth)."""
    if s.kind != "xrootd" or gsi is None:
        return None
    return XrdSecurity(cert_dir=gsi.cert_dir, host_cert=gsi.host_cert, host_key=gsi.host_key,
                       auth=s.auth, issuer_dir=issuer_dir, gridmap=gsi.gridmap, user=user,
                       proxy=gsi.proxy)


def _start_server(s: ServerSpec, sdir: Path, gsi: ca_mod.GsiFiles | None,
                  security: XrdSecurity | None = None, attempts: int = 3) -> Endpoint:
    """Start one server on a free port; retry on a new port if another process took it
    between bind(0) and the server's own bind (parallel test sessions do that)."""
    for attempt in range(attempts):
        try:
            if s.kind == "xrootd":
                start = (start_xrootd if s.tape is None else
                         functools.partial(start_tape_xrootd, tape=s.tape))
                return start(s.name, sdir, tier=s.tier, throttle=s.throttle,
                                    size_limit=s.size_limit,
                                    security=security, davs_name=s.davs_alias(),
                                    # GSI wants the certificate's CN (localhost) in the URL
                                    host="localhost" if s.auth == "gsi" else None)
            return start_gridftp(s.name, sdir, gsi=gsi if s.kind == "gsiftp" else None, tier=s.tier,
                                 size_limit=s.size_limit, idle_timeout=s.idle_timeout)
        except TestbedError as exc:
            if "address already in use" not in str(exc).lower() or attempt == attempts - 1:
                raise
            terminate(pidfile_procs(sdir))
    raise AssertionError("unreachable")


def stop_server(inv: Inventory, name: str) -> None:
    """Kill one server (and its children) to emulate an endpoint that went down."""
    ep = inv.endpoints[name]
    terminate(pidfile_procs(Path(ep.data_dir).parent / "run") or tree(ep.pid))


def put_local(inv: Inventory, endpoint: str, relpath: str, data: bytes) -> str:
    """Create a file directly in an endpoint's data dir (parents too), owned by the server
    user so the server can later overwrite/delete it; returns its URL."""
    ep = inv.endpoints[endpoint]
    path = Path(ep.data_dir) / relpath.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    user = inv.extra.get("service_user")
    if user and os.geteuid() == 0:
        chown_tree(Path(ep.data_dir), user)
    return ep.url + relpath.lstrip("/")


def _gsi_json(gsi: ca_mod.GsiFiles | None) -> dict[str, str] | None:
    from dataclasses import asdict
    return asdict(gsi) if gsi else None


def gsi_of(inv: Inventory) -> ca_mod.GsiFiles:
    """The test CA files of a running grid (e.g. to issue more host certificates)."""
    if not inv.extra.get("gsi"):
        raise TestbedError("this testbed has no GSI servers, hence no test CA")
    return ca_mod.GsiFiles(**inv.extra["gsi"])


def _mount_tmpfs(path: Path, size: int) -> None:
    res = run_quiet(
        ["mount", "-t", "tmpfs", "-o", f"size={int(size)},mode=0755", "tmpfs", str(path)]
    )
    if res.returncode != 0:
        raise TestbedError(f"cannot mount a {size}-byte tmpfs on {path}: {res.stderr.strip()}")


def down() -> None:
    """Stop every server of the local grid (incl. children), unmount, remove state. Idempotent."""
    bases: list[Path] = []
    mounts: list[str] = []
    if inv_mod.inventory_path().exists():
        try:
            inv = inv_mod.load_inventory()
        except TestbedError:
            inv = None
        if inv is not None and inv.mode == "local":
            bases.append(Path(inv.base_dir))
            mounts += inv.mounts
    if _pointer().exists():
        try:
            ptr = state.read_json(_pointer())
            bases.append(Path(ptr["base_dir"]))
            mounts += ptr.get("mounts", [])
        except (OSError, ValueError, KeyError):
            pass
    victims = []
    for base in dict.fromkeys(bases):
        if base.is_dir():
            victims += pidfile_procs(base)
        victims += matching_procs(str(base) + "/")
    terminate(victims)
    for mnt in dict.fromkeys(mounts):
        if os.path.ismount(mnt):
            run_quiet(["umount", "-l", mnt])
    for base in dict.fromkeys(bases):
        _rmtree(base)
    inv_mod.remove_inventory()
    with contextlib.suppress(FileNotFoundError):
        _pointer().unlink()


def _rmtree(base: Path) -> None:
    import shutil
    if base.is_dir() and base.name.startswith("gridxfer-grid-"):
        shutil.rmtree(base, ignore_errors=True)


def status() -> dict:
    """What runs: mode, base_dir and per endpoint url/pid/alive. {"up": False} if nothing."""
    if not inv_mod.inventory_path().exists():
        return {"mode": None, "up": False, "endpoints": {}}
    inv = inv_mod.load_inventory()
    eps = {n: {"url": ep.url, "protocol": ep.protocol, "tier": ep.tier, "pid": ep.pid,
               "alive": alive(ep.pid), "data_dir": ep.data_dir, "log": ep.log,
               "throttle": ep.throttle, "size_limit": ep.size_limit, "davs_url": ep.davs_url,
               "davs_name": ep.davs_name, "auth": ep.auth, "davs_auth": ep.davs_auth,
               "tape_backed": ep.tape_backed, "tape_log": ep.tape_log}
           for n, ep in inv.endpoints.items()}
    return {"mode": inv.mode, "up": any(e["alive"] for e in eps.values()), "base_dir": inv.base_dir,
            "inventory": str(inv_mod.inventory_path()), "endpoints": eps, "env": inv.client_env()}


def _start_reaper(owner_pid: int) -> None:
    """A detached watcher that runs ``down()`` (same $GRIDXFER_HOME) once ``owner_pid`` dies,
    so a test session killed -9 does not leave servers behind. It exits by itself when the
    grid is taken down normally."""
    import subprocess
    import sys

    import psutil
    ctime = psutil.Process(owner_pid).create_time()
    subprocess.Popen([sys.executable, "-m", "gridxfer.testbed.localgrid", "--reap", str(owner_pid),
                      repr(ctime), str(state.home())], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                     env={**os.environ, "GRIDXFER_HOME": str(state.home())})


def _reap(owner_pid: int, ctime: float) -> None:
    import time
    pointer = _pointer()
    while pointer.exists():
        if not alive(owner_pid, ctime):
            down()
            return
        time.sleep(0.5)


if __name__ == "__main__":
    import sys
    if len(sys.argv) == 5 and sys.argv[1] == "--reap":
        os.environ["GRIDXFER_HOME"] = sys.argv[4]
        _reap(int(sys.argv[2]), float(sys.argv[3]))
