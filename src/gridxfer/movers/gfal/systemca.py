"""OpenSSL's default CA file, skipped where its hashed directory holds the same certificates.

davix (gfal2's HTTP plugin) configures its TLS session again for every request gfal2
makes: gfal2 builds a request's parameters per operation, every ``RequestParams`` setter
draws a new state id, and ``configureSession`` (davix src/neon/neonsession.cpp) then
calls ``ne_ssl_trust_default_ca`` -> ``X509_STORE_set_default_paths``, which parses the
whole default CA file (Debian: /etc/ssl/certs/ca-certificates.crt, ~140 certificates)
with OpenSSL 3's decoders: ~24 ms of CPU a request here, under locks the threads fight
over. Small files over davs moved at 8 a second on loopback whatever the concurrency
(docs/performance-notes.md, "Small files over davs://").

The default *directory* (``c_rehash`` links, read one certificate at a time when a chain
needs it) holds the same certificates on Debian (``update-ca-certificates`` writes both).
Where it does (every certificate of the file, byte for byte, under a hash name in the
directory), ``SSL_CERT_FILE`` is pointed at ``/dev/null``: the trust is the same, and the
parse is gone (0.3 ms a request). Where it does not (EL9's directory holds only the
bundle), nothing changes. The file and directory are the ones OpenSSL would use, a
user's ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` included: one is replaced only where the
other holds every certificate of it. The grid's CAs come from ``X509_CERT_DIR`` either
way (gfal2 adds it as a CA path).

Applied by ``campaign.runner.prepare_environment`` (run, resume, cancel, verify) for a
campaign that names a davs/https URL, and by ``gridxfer copy``, before any thread starts
(``os.environ`` is not changed while other threads may read the environment); child
processes (the gfal2 agent) inherit it.
"""
from __future__ import annotations

import os
import re
import ssl
from collections.abc import Mapping
from pathlib import Path

NO_FILE = "/dev/null"
_BEGIN, _END = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"
_HASHED = re.compile(r"[0-9a-f]{8}\.[0-9]+")


def certificates(text: str) -> set[str]:
    """The base64 bodies of the PEM certificates in ``text``, whitespace removed."""
    found = set()
    for chunk in text.split(_BEGIN)[1:]:
        body, end, _ = chunk.partition(_END)
        if end:
            found.add("".join(body.split()))
    return found


def covered(cafile: Path, capaths: list[Path]) -> bool:
    """Whether every certificate of ``cafile`` is a hash-named file of one of ``capaths``."""
    try:
        wanted = certificates(cafile.read_text(errors="replace"))
    except OSError:
        return False
    for capath in capaths if wanted else ():
        try:
            entries = [e.path for e in os.scandir(capath) if _HASHED.fullmatch(e.name)]
        except OSError:
            continue
        for path in entries:
            try:
                wanted -= certificates(Path(path).read_text(errors="replace"))
            except OSError:
                continue
            if not wanted:
                return True
    return False


def choice(env: Mapping[str, str], paths: ssl.DefaultVerifyPaths | None = None) -> str | None:
    """The ``SSL_CERT_FILE`` to set (``NO_FILE``), or None to leave OpenSSL as it is.

    The file and directories are those OpenSSL would use: ``SSL_CERT_FILE`` and
    ``SSL_CERT_DIR`` (a colon-separated list) where set, else its built-in defaults."""
    paths = paths or ssl.get_default_verify_paths()
    cafile = env.get(paths.openssl_cafile_env) or paths.openssl_cafile
    capath = env.get(paths.openssl_capath_env) or paths.openssl_capath
    if cafile == NO_FILE:
        return None                             # done already (this process, or a parent)
    if covered(Path(cafile), [Path(p) for p in capath.split(os.pathsep) if p]):
        return NO_FILE
    return None


def apply() -> str | None:
    """Set ``SSL_CERT_FILE`` for this process and its children where ``choice`` says so."""
    value = choice(os.environ)
    if value is not None:
        os.environ[ssl.get_default_verify_paths().openssl_cafile_env] = value
    return value


__all__ = ["NO_FILE", "apply", "certificates", "choice", "covered"]
