"""Run a real GridFTP server (``globus-gridftp-server``) for the testbed: GSI or anonymous.

* GSI (``gsiftp://``): the server uses a host certificate of the test CA
  (:mod:`gridxfer.testbed.ca`), trusts ``X509_CERT_DIR`` and maps the test user's DN
  through ``GRIDMAP`` to a local account (``gridxfer`` when root; ourselves otherwise).
* Anonymous (``ftp://``): ``-aa -anonymous-user gridxfer`` (the user only when root).

The server runs in its default "daemon" mode without ``-S``: it stays in the foreground
and forks one process per session (all in its process group, so ``down`` kills them).
It reads ``-c <run>/gridftp.conf`` (empty) instead of ``/etc/gridftp.conf``. Paths in
URLs are absolute: ``gsiftp://localhost:PORT/<server_dir>/data/f``; access is limited
to the data dir with ``-restrict-paths``.

API::

    start_gridftp(name, server_dir, *, gsi=None, port=None, bind="127.0.0.1", host=None,
                  wrap=(), run_as=None, tier="", cert=None, key=None,
                  ready_timeout=20.0) -> Endpoint
        gsi=None  -> anonymous ftp:// server
        gsi=GsiFiles -> GSI gsiftp:// server; cert/key default to gsi.host_cert/host_key
                        (CN=localhost); pass ca.host_cert(gsi, name, ips=[...]) for other hosts.

``wrap`` is a command prefix (e.g. ``["ip", "netns", "exec", NS]``); the readiness probe
(read the ``220`` banner) then runs through the same prefix. ``bind`` is the control and
data interface address; ``host`` is the name used in the URL (for GSI it must match the
host certificate; default ``localhost`` for 127.0.0.1, else ``bind``).
"""
from __future__ import annotations

import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from gridxfer.testbed.ca import GsiFiles
from gridxfer.testbed.inventory import Endpoint, TestbedError
from gridxfer.testbed.procs import listens, run_quiet, spawn, wait_ready
from gridxfer.testbed.xrootd import check_reachable, chown_tree, ensure_user, server_layout

GRIDFTP = "/usr/sbin/globus-gridftp-server"

_BANNER_PROBE = (
    "import socket,sys\n"
    "s=socket.create_connection((sys.argv[1],int(sys.argv[2])),timeout=3)\n"
    "b=s.recv(512)\n"
    "sys.exit(0 if b.startswith(b'220') else 1)\n"
)


def banner_ok(addr: str, port: int, wrap: Sequence[str] = ()) -> bool:
    """True once the server greets with an FTP ``220`` banner."""
    if wrap:
        res = run_quiet([*wrap, sys.executable, "-c", _BANNER_PROBE, addr, str(port)], timeout=6)
        return res.returncode == 0
    with socket.create_connection((addr, port), timeout=3) as sock:
        return sock.recv(512).startswith(b"220")


def start_gridftp(name: str, server_dir: Path, *, gsi: GsiFiles | None = None,
                  port: int | None = None,
                  bind: str = "127.0.0.1", host: str | None = None, wrap: Sequence[str] = (),
                  run_as: str | None = None, tier: str = "", cert: str | None = None,
                  key: str | None = None, ready_timeout: float = 20.0,
                  size_limit: int | None = None, idle_timeout: int | None = None) -> Endpoint:
    """Start one globus-gridftp-server; returns its Endpoint once it sends its banner.
    ``idle_timeout``: seconds a control connection may stay idle (the server's default:
    600), after which the server closes it with ``421 Idle Timeout``."""
    if not Path(GRIDFTP).exists():
        raise TestbedError(f"{GRIDFTP} not found (apt-get install globus-gridftp-server-progs)")
    server_dir, data, run, port = server_layout(server_dir, port, bind, wrap)
    conf = run / "gridftp.conf"
    conf.write_text("# empty on purpose: everything is on the command line\n")
    log = run / "gridftp.log"
    user = (run_as or ensure_user()) if os.geteuid() == 0 else ensure_user()
    if os.geteuid() == 0:
        check_reachable(data, user)
    chown_tree(data, user)
    os.chmod(server_dir, 0o755)
    argv = [GRIDFTP, "-c", str(conf), "-p", str(port), "-control-interface", bind,
            "-data-interface", bind, "-log-level", "error,warn,info", "-logfile", str(log),
            "-restrict-paths", f"RW{data}", "-allow-disabled-login"]
    if idle_timeout is not None:
        argv += ["-control-idle-timeout", str(idle_timeout)]
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C", "GLOBUS_USAGE_OPTOUT": "1"}
    if gsi is None:
        argv += ["-aa"]
        if os.geteuid() == 0:
            argv += ["-anonymous-user", user]
        scheme = "ftp"
        url_host = host or bind
    else:
        if os.geteuid() != 0:
            _own_gridmap(gsi, run, user)
            env.update(gsi.server_env(cert, key))
            env["GRIDMAP"] = str(run / "grid-mapfile")
        else:
            env.update(gsi.server_env(cert, key))
        scheme = "gsiftp"
        url_host = host or ("localhost" if bind == "127.0.0.1" else bind)
    proc = spawn("gridftp", argv, run, env=env, wrap=wrap, cwd=run)
    def probe() -> bool:
        if not wrap and not listens(proc.pid, port):     # ours, not some other server
            return False
        return banner_ok(bind, port, wrap)

    wait_ready(proc, probe, timeout=ready_timeout,
               what=f"{scheme} server {name!r} on port {port}", log=str(log))
    netloc = f"[{url_host}]:{port}" if ":" in url_host else f"{url_host}:{port}"
    return Endpoint(name=name, url=f"{scheme}://{netloc}{data}/", protocol=scheme, tier=tier,
                    data_dir=str(data), pid=proc.pid, log=str(log), kind="gsiftp" if gsi else "ftp",
                    port=port, size_limit=size_limit)


def _own_gridmap(gsi: GsiFiles, run: Path, user: str) -> None:
    """Non-root servers can only serve as themselves: map the test DN to ``user``."""
    (run / "grid-mapfile").write_text(f'"{gsi.user_dn}" {user}\n')


def check_gsi_login(ep: Endpoint, env: dict[str, str]) -> None:
    """A real GSI operation against ``ep`` (list its data dir); TestbedError with details."""
    res = run_quiet(["globus-url-copy", "-list", ep.url], env={**os.environ, **env}, timeout=20)
    if res.returncode != 0:
        raise TestbedError(f"GSI login to {ep.name} ({ep.url}) failed: "
                           f"{(res.stderr or res.stdout).strip()[-400:]}")
