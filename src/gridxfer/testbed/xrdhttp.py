"""XrdHttp over TLS, HTTP third-party copy and authentication for a testbed xrootd.

Every xrootd of the testbed that is given a :class:`XrdSecurity` also speaks HTTPS
(``davs://``/``https://``) on its ``root://`` port (XrdHttp tells the protocols apart by
their first bytes), with the testbed's test CA, and serves HTTP-TPC in both modes: pull
(``COPY`` to the destination with ``Source:``) and push (``COPY`` to the source with
``Destination:``). The directives, all checked on Debian 12's xrootd 5.5.3::

    xrd.tls <run>/hostcert.pem <run>/hostkey.pem     # copies readable by the service user
    xrd.tlsca certdir <ca>/certs
    xrd.protocol XrdHttp:<port> libXrdHttp.so        # same port as root://
    http.exthandler xrdtpc libXrdHttpTPC.so           # loaded only when TLS is configured

The ``auth`` mode of the server:

- ``none``: anonymous ``root://``; ``davs://`` anonymous (an X.509 proxy is accepted).
- ``token``: ``davs://`` needs a WLCG token (the SciTokens plugin; without one: 403) and
  ``root://`` needs one through ``ztn`` (which only runs over TLS, so ``xrootd.tls all``:
  XrdCl upgrades a ``root://`` URL by itself)::

      http.header2cgi Authorization authz            # else every request gets 403
      ofs.authorize 1
      ofs.authlib libXrdAccSciTokens.so config=<run>/scitokens.cfg
      xrootd.seclib libXrdSec.so
      sec.protocol ztn
      sec.protbind * only ztn
      xrootd.tls all

  The issuer's public keys come from the key cache seeded into ``$XDG_CACHE_HOME``
  (:func:`gridxfer.testbed.tokens.seed_keycache`); no network.
- ``gsi``: ``roots://`` (and ``root://``) need a GSI proxy of the test CA, mapped by the
  grid-mapfile; ``davs://`` stays anonymous/X.509::

      xrootd.seclib libXrdSec.so
      sec.protocol gsi -certdir:<ca>/certs -cert:... -key:... -gridmap:<gridmap> -gmapopt:2 -crl:0
      sec.protbind * only gsi
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gridxfer.testbed import tokens as tok_mod
from gridxfer.testbed.inventory import TestbedError

AuthMode = Literal["none", "token", "gsi"]
AUTH_MODES: tuple[str, ...] = ("none", "token", "gsi")
TOKEN_BASE = "/data"     # token scopes are relative to this path on a token server


@dataclass(frozen=True)
class XrdSecurity:
    """TLS files, and what a server demands of its clients."""

    cert_dir: str                      # the test CA's certificate directory
    host_cert: str                     # host certificate and key (copied into run/)
    host_key: str
    auth: AuthMode = "none"
    issuer_dir: str = ""               # token: the testbed issuer (gridxfer.testbed.tokens)
    gridmap: str = ""                  # gsi: DN -> account
    proxy: str = ""                    # gsi: a user proxy for the readiness probe
    user: str = ""                     # token: the account files are mapped to

    def root_auth(self) -> str:
        """The authentication ``root://`` asks for: none, ztn or gsi."""
        return {"none": "none", "token": "ztn", "gsi": "gsi"}[self.auth]

    def davs_auth(self) -> str:
        """What ``davs://`` asks for: ``token`` or ``none`` (anonymous, X.509 accepted)."""
        return "token" if self.auth == "token" else "none"


def prepare(sec: XrdSecurity, server_dir: Path, port: int) -> tuple[list[str], dict[str, str]]:
    """Write the server's TLS/auth files below ``server_dir`` (before it is chown'ed to
    the service user); return its extra config lines and environment."""
    if sec.auth not in AUTH_MODES:
        raise TestbedError(f"unknown auth mode {sec.auth!r} (one of {', '.join(AUTH_MODES)})")
    run = server_dir / "run"
    cert, key = run / "hostcert.pem", run / "hostkey.pem"
    shutil.copyfile(sec.host_cert, cert)
    shutil.copyfile(sec.host_key, key)
    os.chmod(cert, 0o644)
    os.chmod(key, 0o600)
    lines = [f"xrd.tls {cert} {key}", f"xrd.tlsca certdir {sec.cert_dir}",
             f"xrd.protocol XrdHttp:{port} libXrdHttp.so",
             "http.exthandler xrdtpc libXrdHttpTPC.so"]
    env: dict[str, str] = {}
    if sec.auth == "token":
        if not sec.issuer_dir:
            raise TestbedError("a token server needs the testbed issuer (issuer_dir)")
        issuer = tok_mod.load_issuer(Path(sec.issuer_dir))
        cache = server_dir / "cache"
        cache.mkdir(exist_ok=True)
        tok_mod.seed_keycache(cache, issuer)
        cfg = run / "scitokens.cfg"
        cfg.write_text(tok_mod.scitokens_cfg(issuer, base_path=TOKEN_BASE, default_user=sec.user))
        lines += ["http.header2cgi Authorization authz", "ofs.authorize 1",
                  f"ofs.authlib libXrdAccSciTokens.so config={cfg}",
                  "xrootd.seclib libXrdSec.so", "sec.protocol ztn", "sec.protbind * only ztn",
                  "xrootd.tls all"]
        env["XDG_CACHE_HOME"] = str(cache)
    elif sec.auth == "gsi":
        if not sec.gridmap:
            raise TestbedError("a GSI server needs a grid-mapfile")
        lines += ["xrootd.seclib libXrdSec.so",
                  f"sec.protocol gsi -certdir:{sec.cert_dir} -cert:{cert} -key:{key} "
                  f"-gridmap:{sec.gridmap} -gmapopt:2 -crl:0",
                  "sec.protbind * only gsi"]
    return lines, env


def probe_env(sec: XrdSecurity | None, base: dict[str, str]) -> dict[str, str]:
    """The environment for the readiness probe (``xrdfs query config``): it must pass
    the server's authentication too."""
    env = dict(base)
    if sec is None:
        return env
    env["X509_CERT_DIR"] = sec.cert_dir
    if sec.auth == "token":
        issuer = tok_mod.load_issuer(Path(sec.issuer_dir))
        env["BEARER_TOKEN"] = tok_mod.mint(issuer, ["storage.read:/"], lifetime=120)
        env.pop("BEARER_TOKEN_FILE", None)
    elif sec.auth == "gsi" and sec.proxy:
        env["X509_USER_PROXY"] = sec.proxy
    return env
