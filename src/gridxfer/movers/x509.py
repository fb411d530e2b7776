"""Where the grid's X.509 files are, by the rules gfal2, XrdCl and globus share: the CA
directory (``X509_CERT_DIR``, else ``/etc/grid-security/certificates``) and the user's
proxy (``X509_USER_PROXY``, else ``/tmp/x509up_u<uid>``). Read at each call: a campaign
may run while the proxy is renewed."""
from __future__ import annotations

import os


def trust_dir() -> str:
    return os.environ.get("X509_CERT_DIR") or "/etc/grid-security/certificates"


def proxy_file() -> str:
    return os.environ.get("X509_USER_PROXY") or f"/tmp/x509up_u{os.getuid()}"


__all__ = ["proxy_file", "trust_dir"]
