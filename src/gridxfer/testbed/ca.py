"""A throw-away X.509 test CA for real GSI (gsiftp://) on the testbed, made with openssl.

Layout of ``ca_dir`` (everything world-readable except the ``*key.pem`` files, which are
0600: the GridFTP server reads its key as root before it setuids to the mapped user,
and the forked per-session server still needs to read ``certs/`` as that user)::

    certs/<hash>.0, <hash_old>.0             CA certificate (both subject hash flavours)
    certs/<hash>.signing_policy (+ old)      Globus signing policy
    ca.pem ca.key.pem                        CA
    host-<name>.pem host-<name>.key.pem      host certificates (CN=<name>, SANs)
    usercert.pem userkey.pem                 the test user
    proxy.pem                                RFC 3820 proxy of the test user (0600)
    grid-mapfile                             user DN -> local account

API::

    gsi = make_test_ca(ca_dir, local_user="gridxfer")  # -> GsiFiles (CA, localhost, user, proxy)
    host_cert(gsi, "se01.t1a", ips=["198.18.1.2"])      # -> (cert, key) for another host name
    gsi.client_env()                                    # X509_CERT_DIR, X509_USER_PROXY, ...
    gsi.server_env(cert, key)                           # env for globus-gridftp-server
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gridxfer.testbed.inventory import TestbedError
from gridxfer.testbed.procs import run_quiet

CA_SUBJECT = "/DC=org/DC=gridxfer/CN=gridxfer Test CA"
USER_SUBJECT = "/DC=org/DC=gridxfer/OU=users/CN=gridxfer tester"
DAYS = "30"


@dataclass(frozen=True)
class GsiFiles:
    ca_dir: str
    cert_dir: str
    ca_cert: str
    ca_key: str
    host_cert: str      # CN=localhost, SAN DNS:localhost, IP:127.0.0.1
    host_key: str
    user_cert: str
    user_key: str
    proxy: str
    user_dn: str
    gridmap: str

    def client_env(self) -> dict[str, str]:
        return {"X509_CERT_DIR": self.cert_dir, "X509_USER_PROXY": self.proxy}

    def server_env(self, cert: str | None = None, key: str | None = None) -> dict[str, str]:
        return {"X509_CERT_DIR": self.cert_dir, "X509_USER_CERT": cert or self.host_cert,
                "X509_USER_KEY": key or self.host_key, "GRIDMAP": self.gridmap}


def _openssl(*args: str) -> str:
    res = run_quiet(["openssl", *args], timeout=60)
    if res.returncode != 0:
        raise TestbedError(f"openssl {args[0]} failed: {(res.stderr or res.stdout).strip()[-300:]}")
    return res.stdout.strip()


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.write_text(text)
    os.chmod(path, mode)


def _issue(ca_dir: Path, stem: str, subject: str, ext: str, serial: int) -> tuple[str, str]:
    key, csr = ca_dir / f"{stem}.key.pem", ca_dir / f"{stem}.csr"
    cert, extfile = ca_dir / f"{stem}.pem", ca_dir / f"{stem}.ext"
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
             "-subj", subject)
    os.chmod(key, 0o600)
    _write(extfile, ext)
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca_dir / "ca.pem"), "-CAkey",
             str(ca_dir / "ca.key.pem"), "-set_serial", str(serial), "-days", DAYS,
             "-out", str(cert), "-extfile", str(extfile))
    os.chmod(cert, 0o644)
    return str(cert), str(key)


def host_cert(gsi: GsiFiles, name: str, *, dns: Sequence[str] = (),
              ips: Sequence[str] = ()) -> tuple[str, str]:
    """Issue (or reuse) a host certificate CN=<name> with SANs; returns (cert, key) paths."""
    ca_dir = Path(gsi.ca_dir)
    stem = f"host-{name}"
    if (ca_dir / f"{stem}.pem").exists():
        return str(ca_dir / f"{stem}.pem"), str(ca_dir / f"{stem}.key.pem")
    sans = [f"DNS:{d}" for d in dict.fromkeys([name, *dns])] + [f"IP:{ip}" for ip in ips]
    ext = ("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
           f"extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName={','.join(sans)}\n")
    serial = 100 + len(list(ca_dir.glob("host-*.pem")))
    return _issue(ca_dir, stem, f"/DC=org/DC=gridxfer/CN={name}", ext, serial)


def make_test_ca(ca_dir: Path, *, local_user: str, proxy_hours: int = 48) -> GsiFiles:
    """Create the CA, a localhost host cert, a user cert + RFC proxy and a grid-mapfile."""
    ca_dir = Path(ca_dir)
    certs = ca_dir / "certs"
    certs.mkdir(parents=True, exist_ok=True)
    os.chmod(ca_dir, 0o755)
    os.chmod(certs, 0o755)
    ca_pem, ca_key = ca_dir / "ca.pem", ca_dir / "ca.key.pem"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key),
             "-out", str(ca_pem), "-days", DAYS, "-subj", CA_SUBJECT,
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             "-addext", "subjectKeyIdentifier=hash")
    os.chmod(ca_key, 0o600)
    os.chmod(ca_pem, 0o644)
    new_hash = _openssl("x509", "-hash", "-noout", "-in", str(ca_pem))
    old_hash = _openssl("x509", "-subject_hash_old", "-noout", "-in", str(ca_pem))
    policy = (f"access_id_CA   X509   '{CA_SUBJECT}'\npos_rights     globus CA:sign\n"
              "cond_subjects  globus '\"/DC=org/DC=gridxfer/*\"'\n")
    namespaces = (f"TO Issuer \"{CA_SUBJECT}\" \\\n  PERMIT Subject \"/DC=org/DC=gridxfer/.*\"\n")
    for h in dict.fromkeys([new_hash, old_hash]):
        _write(certs / f"{h}.0", ca_pem.read_text())
        _write(certs / f"{h}.signing_policy", policy)
        _write(certs / f"{h}.namespaces", namespaces)
    host, hkey = host_cert_localhost(ca_dir)
    ucert, ukey = _issue(ca_dir, "user", USER_SUBJECT,
                         "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment,"
                         "dataEncipherment\nextendedKeyUsage=clientAuth\n", 3)
    proxy = ca_dir / "proxy.pem"
    env = {**os.environ, "X509_CERT_DIR": str(certs)}
    res = run_quiet(["grid-proxy-init", "-q", "-cert", ucert, "-key", ukey, "-out", str(proxy),
                     "-valid", f"{proxy_hours}:00"], env=env, timeout=60)
    if res.returncode != 0 or not proxy.exists():
        raise TestbedError(f"grid-proxy-init failed: {(res.stderr or res.stdout).strip()[-300:]}")
    os.chmod(proxy, 0o600)
    gridmap = ca_dir / "grid-mapfile"
    _write(gridmap, f'"{USER_SUBJECT}" {local_user}\n')
    return GsiFiles(ca_dir=str(ca_dir), cert_dir=str(certs), ca_cert=str(ca_pem),
                    ca_key=str(ca_key),
                    host_cert=host, host_key=hkey, user_cert=ucert, user_key=ukey, proxy=str(proxy),
                    user_dn=USER_SUBJECT, gridmap=str(gridmap))


def host_cert_localhost(ca_dir: Path) -> tuple[str, str]:
    ext = ("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
           "extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n")
    return _issue(Path(ca_dir), "host-localhost", "/DC=org/DC=gridxfer/CN=localhost", ext, 2)
