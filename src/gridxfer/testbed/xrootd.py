"""Run a real XRootD server (``/usr/bin/xrootd``) for the testbed.

xrootd refuses to run as root: when we are root it is started through
``setpriv --reuid=<user> ...`` (default ``gridxfer``, a system user created on demand by
:func:`ensure_user`; ``xrootd -R`` would only drop the effective uid), and its
directories are chown'ed to that user. When not root it runs as ourselves.

Each server gets ``server_dir/{data,run}``; ``oss.localroot`` is ``server_dir`` and
``/data`` is exported, so ``root://HOST:PORT//data/f`` is ``server_dir/data/f`` on disk.
The config enables ``xrootd.chksum adler32`` (the server runs with glibc malloc tunables that
keep its 64 MB checksum buffer: see ``MALLOC_TUNABLES``), root->root third-party copy
(``ofs.tpc autorm pgm /usr/bin/xrdcp --server``: the destination server pulls from the
source with ``xrdcp``; use ``xrdcp --tpc only``/gfal2 with the TPC flag), and optionally
the throttle plugin (``xrootd.fslib throttle default`` + ``throttle.throttle data N``;
libXrdThrottle-5.so) which caps the *server's total* data rate (reads and writes).
Measured with single-stream xrdcp at ``throttle=4e6``: reads 3.95-4.2 MB/s, writes
4.0-4.9 MB/s, except that roughly the first second after start/idle is not throttled
(a fresh 8 MB read ran at 9 MB/s). Beware: XrdCl substreams (``xrdcp -S 4`` /
``XRD_SUBSTREAMSPERCHANNEL``) against a throttled server collapse to ~0.4 MB/s.
Unthrottled loopback: ~100 MB/s per single xrdcp (incl. process start).

API::

    start_xrootd(name, server_dir, *, port=None, bind="127.0.0.1", host=None,
                 throttle=None, wrap=(), run_as=None, tier="", ready_timeout=20.0) -> Endpoint

``wrap`` is a command prefix such as ``["ip", "netns", "exec", "gx-t1a-se01"]`` (it must
exec the server so the pid is the server's; the readiness probe ``xrdfs ... query config
version`` is run through the same prefix). ``bind`` is the address to probe/connect to
(xrootd itself listens on all addresses of its network namespace); ``host`` is the name
put into the URL (default: ``bind``).
"""
from __future__ import annotations

import os
import pwd
import shutil
from collections.abc import Sequence
from pathlib import Path

from gridxfer.testbed import xrdhttp
from gridxfer.testbed.inventory import Endpoint, TestbedError
from gridxfer.testbed.xrdhttp import XrdSecurity
from gridxfer.testbed.procs import free_port, listens, run_quiet, spawn, wait_ready

XROOTD = "/usr/bin/xrootd"
SERVICE_USER = "gridxfer"


def ensure_user(name: str = SERVICE_USER) -> str:
    """The unprivileged account servers run as; created (system, no home) when root."""
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid()).pw_name
    try:
        pwd.getpwnam(name)
    except KeyError:
        res = run_quiet(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name]
        )
        if res.returncode not in (0, 9):      # 9: already exists (race with another up)
            raise TestbedError(
                f"cannot create service user {name!r}: {res.stderr.strip()}") from None
    return name


def chown_tree(path: Path, user: str) -> None:
    """Give ``path`` (recursively) to ``user`` when we are root; no-op otherwise."""
    if os.geteuid() != 0:
        return
    pw = pwd.getpwnam(user)
    for root, dirs, files in os.walk(path):
        os.chown(root, pw.pw_uid, pw.pw_gid)
        for entry in dirs + files:
            os.chown(os.path.join(root, entry), pw.pw_uid, pw.pw_gid, follow_symlinks=False)


def server_layout(server_dir: Path, port: int | None, bind: str,
                  wrap: Sequence[str]) -> tuple[Path, Path, Path, int]:
    """A server's ``data/`` and ``run/`` directories (created) and its port (a free one on
    ``bind`` unless given; on loopback when wrapped into a namespace)."""
    server_dir = Path(server_dir).resolve()
    data, run = server_dir / "data", server_dir / "run"
    data.mkdir(parents=True, exist_ok=True)
    run.mkdir(parents=True, exist_ok=True)
    return server_dir, data, run, port or free_port(bind if not wrap else "127.0.0.1")


def drop_privileges(user: str) -> list[str]:
    """Command prefix that execs the rest as ``user`` (real+effective+saved ids, no groups).

    Not ``xrootd -R user``: that only changes the *effective* uid (real/saved stay 0).
    ``setpriv`` execs in place, so the spawned pid is the server's.
    """
    return ["setpriv", f"--reuid={user}", f"--regid={pwd.getpwnam(user).pw_gid}",
            "--clear-groups", "--"]


def xrootd_config(*, port: int, server_dir: Path, throttle: float | None = None,
                  extra: Sequence[str] = ()) -> str:
    run = server_dir / "run"
    lines = [
        f"xrd.port {port}",
        f"all.adminpath {run}",
        f"all.pidpath {run}",
        f"oss.localroot {server_dir}",
        "all.export /data",
        "xrootd.chksum adler32",
        "ofs.tpc autorm pgm /usr/bin/xrdcp --server",
    ]
    if throttle:
        lines += ["xrootd.fslib throttle default", f"throttle.throttle data {int(throttle)}"]
    return "\n".join([*lines, *extra]) + "\n"


# xrootd < 5.6.6 can die at start-up in getenv() (xrootd/xrootd#2107): the log handler
# thread's Wait4Midnight calls mktime, hence getenv("TZ"), while the main thread still
# exports XRD* variables (setenv reallocates environ). Seen as "exited during start-up"
# with an empty log, 1 start in ~360 under load here (5 of 1,800; 0 of 1,800 with this).
# With "-k <signal>" that thread waits for the signal instead (the log is rotated only on
# SIGWINCH, which nobody sends a daemon without a terminal).
LOG_ROTATE_SIGNAL = "winch"


def start_xrootd(name: str, server_dir: Path, *, port: int | None = None, bind: str = "127.0.0.1",
                 host: str | None = None, throttle: float | None = None, wrap: Sequence[str] = (),
                 run_as: str | None = None, tier: str = "", ready_timeout: float = 20.0,
                 size_limit: int | None = None, security: XrdSecurity | None = None,
                 davs_name: str = "", extra_config: Sequence[str] = ()) -> Endpoint:
    """Start one xrootd; returns its Endpoint once ``xrdfs query config version`` answers.

    With ``security`` it also serves ``davs://`` (XrdHttp over TLS, HTTP-TPC) on the same
    port and authenticates as ``security.auth`` says (:mod:`gridxfer.testbed.xrdhttp`).
    ``extra_config``: more directives (e.g. the prepare plugin of a tape-backed server)."""
    if not Path(XROOTD).exists():
        raise TestbedError(f"{XROOTD} not found (apt-get install xrootd-server)")
    server_dir, data, run, port = server_layout(server_dir, port, bind, wrap)
    extra_cfg, extra_env = xrdhttp.prepare(security, server_dir, port) if security else ([], {})
    cfg = run / "xrootd.cfg"
    cfg.write_text(
        xrootd_config(port=port, server_dir=server_dir, throttle=throttle,
                      extra=[*extra_cfg, *extra_config])
    )
    log = run / "xrootd.log"
    argv = [XROOTD, "-c", str(cfg), "-l", str(log), "-k", LOG_ROTATE_SIGNAL]
    if os.geteuid() == 0:
        user = run_as or ensure_user()
        check_reachable(server_dir, user)
        chown_tree(server_dir, user)
        os.chmod(server_dir, 0o755)
        argv = [*drop_privileges(user), *argv]
    proc = spawn("xrootd", argv, run, env={**_server_env(), **extra_env}, wrap=wrap, cwd=run)
    url_host = host or bind
    netloc = f"[{url_host}]:{port}" if ":" in url_host else f"{url_host}:{port}"
    # GSI clients insist that the server certificate's CN is the host name in the URL
    probe_host = url_host if security and security.auth == "gsi" else bind
    probe_url = f"root://{probe_host}:{port}" if ":" not in probe_host else f"root://[{probe_host}]:{port}"

    probe_env = xrdhttp.probe_env(security, {
        **os.environ, "XRD_CONNECTIONRETRY": "1", "XRD_CONNECTIONWINDOW": "2",
        "XRD_REQUESTTIMEOUT": "4", "XRD_STREAMTIMEOUT": "4"})

    def probe() -> bool:
        if not wrap and not listens(proc.pid, port):     # ours, not some other server
            return False
        res = run_quiet([*wrap, "xrdfs", probe_url, "query", "config", "version"], timeout=6,
                        env=probe_env)
        return res.returncode == 0 and res.stdout.strip().startswith("v")

    wait_ready(proc, probe, timeout=ready_timeout,
               what=f"xrootd {name!r} on port {port}", log=str(log))
    scheme = "roots" if security and security.auth == "gsi" else "root"
    http: dict[str, str] = {} if security is None else {
        "davs_url": f"davs://{netloc}/data/", "davs_name": davs_name,
        "auth": security.root_auth(), "davs_auth": security.davs_auth(),
        "token_base": xrdhttp.TOKEN_BASE if security.auth == "token" else ""}
    return Endpoint(name=name, url=f"{scheme}://{netloc}//data/", protocol=scheme, tier=tier,
                    data_dir=str(data), pid=proc.pid, log=str(log), kind="xrootd", port=port,
                    throttle=throttle, size_limit=size_limit, davs_url=http.get("davs_url", ""),
                    davs_name=http.get("davs_name", ""), auth=http.get("auth", ""),
                    davs_auth=http.get("davs_auth", ""), token_base=http.get("token_base", ""))


def check_reachable(path: Path, user: str) -> None:
    """TestbedError unless ``user`` can traverse every parent of ``path`` (o+x or owner)."""
    pw = pwd.getpwnam(user)
    for parent in Path(path).resolve().parents:
        st = parent.stat()
        if (
            st.st_uid == pw.pw_uid
            or st.st_mode & 0o001
            or (st.st_gid == pw.pw_gid and st.st_mode & 0o010)
        ):
            continue
        raise TestbedError(
            f"{path}: servers run as {user!r}, who cannot enter {parent} "
            f"(mode {st.st_mode & 0o777:o}); put server dirs below a world-traversable "
            "directory such as /tmp"
        )


# xrootd 5.5 computes a checksum by reading the file into a malloc'ed buffer of up to 64 MB
# (XrdCksManOss::Calc; ofs.cksrdsz is ignored there). glibc serves that from a fresh mmap and
# unmaps it on free, so every query of a large file page-faults 16,384 pages: 134-149 ms of
# server CPU per 64 MB file, ~90 ms of it in the kernel. One arena and no mmap make the
# buffer come from the heap and stay there (kept below the trim threshold): 70-74 ms, the
# same answers (measured; BENCHMARKS.md "Fifth pass"). Cost: the server keeps up to
# 64 MB of heap per checksum it computed at the same time.
MALLOC_TUNABLES = ("glibc.malloc.arena_max=1:glibc.malloc.mmap_max=0:"
                   "glibc.malloc.trim_threshold=536870912")


def _server_env() -> dict[str, str]:
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C", "GLIBC_TUNABLES": MALLOC_TUNABLES}
    for key in ("LD_LIBRARY_PATH",):
        if key in os.environ:
            env[key] = os.environ[key]
    if shutil.which("xrdcp") is None:
        raise TestbedError("xrdcp not found (apt-get install xrootd-client); needed for TPC")
    return env
