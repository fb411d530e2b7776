"""Real XRootD and GSI GridFTP servers inside the hosts of the netns grid.

Reuses the local grid's launchers (:func:`gridxfer.testbed.xrootd.start_xrootd`,
:func:`gridxfer.testbed.gridftp.start_gridftp`) with ``wrap=["ip","netns","exec",NS]``
and ``bind=<host address>``. Each namespace has its own port space, so every storage
host serves ``root://ADDR:1094//data/`` (and ``davs://ADDR:1094/data/``: XrdHttp over TLS
with HTTP-TPC, named ``<host>-davs``) and ``gsiftp://ADDR:2811/<dir>/data/`` (and
``ssh root@ADDR`` with the grid's key when ``sshd`` is listed: ``inventory.extra["ssh"]``
gives host, port, user, key and a strict known_hosts per host). The GSI
host certificate of each host is issued by the grid's test CA with CN and SANs = its
address. Server files live in a world-traversable ``/tmp/gridxfer-netgrid-*`` because
the servers run as the unprivileged ``gridxfer`` user.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gridxfer.testbed import ca as ca_mod
from gridxfer.testbed import inventory as inv_mod
from gridxfer.testbed import tokens as tok_mod
from gridxfer.testbed.inventory import Endpoint, Inventory
from gridxfer.testbed.netns import wrap
from gridxfer.testbed.procs import run_quiet, spawn, wait_ready
from gridxfer.testbed.topology import Topology
from gridxfer.testbed.xrdhttp import XrdSecurity

XROOTD_PORT = 1094
SSH_PORT = 22
ANSIBLE_NAME = "ansible-hosts.ini"
SSHD = "/usr/sbin/sshd"
GRIDFTP_PORT = 2811
BASE_PREFIX = "gridxfer-netgrid-"


def _save(st: dict[str, Any]) -> None:
    from gridxfer.testbed.netgrid import _save as save_state
    save_state(st)


def placeholder_inventory(st: dict[str, Any]) -> None:
    """An endpoint-less netns inventory, written first, so that `testbed down` picks the
    netns teardown even when `up` is killed before the servers start."""
    inv_mod.save_inventory(Inventory(mode="netns", endpoints={}, env={},
                                     base_dir=st.get("base_dir", ""), extra=_extra(st)))


def _extra(st: dict[str, Any]) -> dict[str, Any]:
    return {"name": st["name"], "topology": st["topology"], "router": st["router"],
            "controller": st.get("controller"), "hosts": st["hosts"], "links": st.get("links", [])}


def start_services(topo: Topology, st: dict[str, Any], notify: Callable[[str], None]) -> Inventory:
    """Start every host's services; write and return the netns Inventory."""
    from gridxfer.testbed.gridftp import start_gridftp
    from gridxfer.testbed.localgrid import client_env
    from gridxfer.testbed.procs import read_pidfiles
    from gridxfer.testbed.tapexrd import TapeSpec, start_tape_xrootd
    from gridxfer.testbed.xrootd import ensure_user, start_xrootd

    wanted = [h for h in topo.hosts if h.services]
    endpoints: dict[str, Endpoint] = {}
    extra = _extra(st)
    env: dict[str, str] = {}
    if wanted:
        base = Path(tempfile.mkdtemp(prefix=BASE_PREFIX, dir=os.environ.get("GRIDXFER_TESTBED_DIR")
                                     or tempfile.gettempdir()))
        os.chmod(base, 0o755)
        st["base_dir"] = str(base)
        _save(st)
        user = ensure_user()
        gsi = None
        if any({"gridftp", "xrootd", "xrootd-tape"} & set(h.services) for h in wanted):
            gsi = ca_mod.make_test_ca(base / "ca", local_user=user)
            env = client_env(gsi)
            extra["gsi"] = dataclasses.asdict(gsi)
        extra["service_user"] = user
        issuer_dir = ""
        if any(h.auth == "token" for h in wanted):      # the grid is its own token issuer
            issuer_dir = str(base / "issuer")
            tok_mod.make_issuer(Path(issuer_dir))
            extra["issuer"] = issuer_dir
        keys: dict[str, str] | None = None
        for host in wanted:
            ns = st["hosts"][host.name]["netns"]
            prefix = wrap(ns)
            if "xrootd" in host.services or "xrootd-tape" in host.services:
                # davs:// beside root:// (XrdHttp over TLS, HTTP-TPC), anonymous; xrootd-tape:
                # tape-backed (EMULATED drives behind xrootd's prepare plugin)
                start = (start_xrootd if "xrootd" in host.services else
                         functools.partial(start_tape_xrootd, tape=TapeSpec()))
                ep = start(f"{host.name}-xrd", base / host.name / "xrd", port=XROOTD_PORT,
                           bind=host.address, wrap=prefix, tier=host.tier,
                           security=_tls(gsi, host.address, host.name, host.auth,
                                         issuer_dir, user),
                           davs_name=f"{host.name}-davs")
                endpoints[ep.name] = dataclasses.replace(ep, host=ns)
                if ep.tape_backed:      # its drives run outside the namespace: stop them too
                    for proc in read_pidfiles(base / host.name / "xrd" / "run"):
                        if "gridxfer.testbed.tape" in proc.get("argv", []):
                            st["pids"][f"{host.name}-tape"] = int(proc["pid"])
            if "gridftp" in host.services and gsi is not None:
                cert, key = ca_mod.host_cert(gsi, host.address, dns=[host.name], ips=[host.address])
                ep = start_gridftp(f"{host.name}-gsiftp", base / host.name / "gsiftp", gsi=gsi,
                                   port=GRIDFTP_PORT, bind=host.address, host=host.address,
                                   wrap=prefix, tier=host.tier, cert=cert, key=key)
                endpoints[ep.name] = dataclasses.replace(ep, host=ns)
            if "sshd" in host.services:
                keys = keys or _client_keys(base)
                pid = _start_sshd(host.name, host.address, ns, base, keys)
                st["pids"][f"{host.name}-sshd"] = pid
                extra.setdefault("ssh", {})[host.name] = {
                    "host": host.address, "port": SSH_PORT, "user": "root", "pid": pid,
                    "key": keys["key"], "known_hosts": keys["known_hosts"]}
            st["pids"].update({n: e.pid for n, e in endpoints.items()})
            _save(st)
    if extra.get("ssh"):
        path = inv_mod.testbed_dir() / ANSIBLE_NAME
        path.write_text(ansible_inventory(extra["ssh"], {h.name: h.tier for h in topo.hosts}))
        extra["ansible_inventory"] = str(path)
    inv = Inventory(mode="netns", endpoints=endpoints, env=env, base_dir=st.get("base_dir", ""),
                    pids=dict(st["pids"]), extra=extra)
    inv_mod.save_inventory(inv)
    return inv


def _tls(gsi: ca_mod.GsiFiles | None, address: str, name: str, auth: str = "none",
         issuer_dir: str = "", user: str = "") -> XrdSecurity | None:
    if gsi is None:
        return None
    cert, key = ca_mod.host_cert(gsi, address, dns=[name], ips=[address])
    if auth == "token":
        return XrdSecurity(cert_dir=gsi.cert_dir, host_cert=cert, host_key=key, auth="token",
                           issuer_dir=issuer_dir, user=user)
    return XrdSecurity(cert_dir=gsi.cert_dir, host_cert=cert, host_key=key)


def _keygen(path: Path, comment: str) -> str:
    res = run_quiet(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])
    if res.returncode != 0:
        raise inv_mod.TestbedError(f"ssh-keygen failed: {(res.stderr or res.stdout).strip()}")
    return Path(f"{path}.pub").read_text().strip()


def _client_keys(base: Path) -> dict[str, str]:
    """One client key for the grid (its public half authorised on every sshd)."""
    d = base / "ssh"
    d.mkdir(mode=0o700)
    pub = _keygen(d / "id_ed25519", "gridxfer-testbed")
    (d / "authorized_keys").write_text(pub + "\n")
    (d / "known_hosts").write_text("")
    return {"key": str(d / "id_ed25519"), "known_hosts": str(d / "known_hosts"),
            "authorized_keys": str(d / "authorized_keys")}


def _start_sshd(name: str, address: str, ns: str, base: Path, keys: dict[str, str]) -> int:
    """sshd on ``address:22`` inside ``ns``: key auth only, as root (for `tune --host`);
    its host key goes into the grid's known_hosts, so clients verify it strictly."""
    if not Path(SSHD).exists():
        raise inv_mod.TestbedError(f"{SSHD} not found (apt-get install openssh-server)")
    run = base / name / "sshd"
    run.mkdir(parents=True)
    hostpub = _keygen(run / "ssh_host_ed25519_key", name)
    with open(keys["known_hosts"], "a") as fh:
        fh.write(f"{address},{name} {hostpub}\n")
    cfg = run / "sshd_config"
    cfg.write_text(f"Port {SSH_PORT}\nListenAddress {address}\n"
                   f"HostKey {run / 'ssh_host_ed25519_key'}\nPidFile {run / 'sshd.pid'}\n"
                   f"AuthorizedKeysFile {keys['authorized_keys']}\n"
                   "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                   "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
                   "Subsystem sftp internal-sftp\nLogLevel ERROR\n")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)    # sshd's privilege-separation dir
    proc = spawn("sshd", [SSHD, "-D", "-e", "-f", str(cfg)], run, wrap=wrap(ns), cwd=run)
    probe = [*wrap(ns), sys.executable, "-c", _SSH_PROBE, address, str(SSH_PORT)]
    wait_ready(proc, lambda: run_quiet(probe, timeout=6).returncode == 0, timeout=20,
               what=f"sshd on {name}")
    return proc.pid


_SSH_PROBE = ("import socket,sys\n"
              "s=socket.create_connection((sys.argv[1],int(sys.argv[2])),timeout=3)\n"
              "sys.exit(0 if s.recv(64).startswith(b'SSH-') else 1)\n")


def ansible_inventory(ssh: dict[str, dict[str, Any]], tiers: dict[str, str]) -> str:
    """An Ansible INI inventory of the hosts that run sshd, grouped by tier, with the
    grid's key and strict host-key checking against its known_hosts."""
    groups: dict[str, list[str]] = {}
    for name, sh in sorted(ssh.items()):
        group = re.sub(r"[^A-Za-z0-9_]", "_", tiers.get(name, "grid"))
        groups.setdefault(group, []).append(
            f"{name} ansible_host={sh['host']} ansible_port={sh['port']} "
            f"ansible_user={sh['user']} ansible_ssh_private_key_file={sh['key']} "
            f"ansible_ssh_common_args='-o UserKnownHostsFile={sh['known_hosts']} "
            f"-o StrictHostKeyChecking=yes'")
    out = ["# written by `gridxfer testbed up` (netns grid); hosts that run sshd"]
    for group, lines in groups.items():
        out += [f"[{group}]", *lines, ""]
    return "\n".join(out)


def cleanup_services(st: dict[str, Any]) -> None:
    """Remove server files and the inventory (processes died with their namespaces)."""
    base = st.get("base_dir")
    if base and Path(base).name.startswith(BASE_PREFIX):
        shutil.rmtree(base, ignore_errors=True)
    (inv_mod.testbed_dir() / ANSIBLE_NAME).unlink(missing_ok=True)
    try:
        if inv_mod.load_inventory().mode == "netns":
            inv_mod.remove_inventory()
    except inv_mod.TestbedError:
        pass
