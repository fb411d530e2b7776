"""The FTS3 STAND-IN's X.509 side (not FTS3): who a TLS client is, and proxy delegation as
fts-rest-flask's controllers/delegation.py does it (read at the mirrored HEAD; no code
copied), so the official client's ``easy.delegate`` runs its real protocol:

``GET /delegation/<id>`` -> null or ``{"termination_time"}``; ``GET .../request`` -> a
certificate request (the server keeps the key); ``PUT .../credential`` <- the proxy the
client signed with its own proxy, whose key must match the request's and which must be
issued by the certificate after it. A certificate user submits only with a delegation
that has more than an hour left (else HTTP 419, as fts-rest).

Identity: an RFC proxy names its user in its issuer (what mod_gridsite passes fts-rest as
``GRST_CRED_AURI_0``); the delegation id is sha1(DN)[:16] and, without VOMS, the user's
"virtual VO" is that id (measured on fts-rest-flask).
"""
from __future__ import annotations

import datetime as dt
import hashlib
import ssl
import threading

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa

_PROXY_INFO = x509.ObjectIdentifier("1.3.6.1.5.5.7.1.14")
ALLOW_PROXY_CERTS = 0x40            # OpenSSL's X509_V_FLAG_ALLOW_PROXY_CERTS


class DelegationError(Exception):
    """fts-rest's BadRequest on a PUT credential."""


def server_context(cert: str, key: str, ca_file: str) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.verify_mode = ssl.CERT_OPTIONAL      # a token client brings no certificate
    ctx.load_verify_locations(ca_file)
    ctx.verify_flags |= ALLOW_PROXY_CERTS
    return ctx


def _slash(name: x509.Name) -> str:
    return "".join(f"/{a.rfc4514_attribute_name}="
                   f"{a.value if isinstance(a.value, str) else a.value.decode()}" for a in name)


def user_dn(der: bytes) -> str:
    cert = x509.load_der_x509_certificate(der)
    try:
        cert.extensions.get_extension_for_oid(_PROXY_INFO)
        return _slash(cert.issuer)
    except x509.ExtensionNotFound:
        return _slash(cert.subject)


def delegation_id(dn: str) -> str:
    return hashlib.sha1(dn.encode()).hexdigest()[:16]     # noqa: S324  (fts-rest's id)


class Delegations:
    def __init__(self) -> None:
        self._keys: dict[str, rsa.RSAPrivateKey] = {}
        self._until: dict[str, dt.datetime] = {}
        self._lock = threading.Lock()
        self.delegated = 0                   # PUT credentials accepted

    def info(self, dlg_id: str) -> dict[str, str] | None:
        with self._lock:
            until = self._until.get(dlg_id)
        return None if until is None else {"termination_time":
                                           until.strftime("%Y-%m-%dT%H:%M:%S")}

    def request(self, dlg_id: str) -> str:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        csr = (x509.CertificateSigningRequestBuilder()
               .subject_name(x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "proxy")]))
               .sign(key, hashes.SHA256()))
        with self._lock:
            self._keys[dlg_id] = key
        return csr.public_bytes(serialization.Encoding.PEM).decode()

    def put(self, dlg_id: str, pem: bytes) -> None:
        with self._lock:
            key = self._keys.get(dlg_id)
        if key is None:
            raise DelegationError("No credential cache found")
        try:
            chain = x509.load_pem_x509_certificates(pem)
        except ValueError as exc:
            raise DelegationError(f"Could not process the proxy: {exc}") from None
        if len(chain) < 2:
            raise DelegationError("Could not process the proxy: Malformed proxy")
        pub = chain[0].public_key()
        if not isinstance(pub, rsa.RSAPublicKey) or \
                pub.public_numbers() != key.public_key().public_numbers():
            raise DelegationError("Could not process the proxy: The proxy does not match "
                                  "the stored associated private key")
        try:
            chain[0].verify_directly_issued_by(chain[1])
        except (ValueError, TypeError, Exception) as exc:  # noqa: BLE001  (InvalidSignature)
            raise DelegationError(f"Could not process the proxy: {exc}") from None
        until = min(c.not_valid_after_utc for c in chain).replace(tzinfo=None)
        with self._lock:
            self._until[dlg_id] = until
            self.delegated += 1

    def may_submit(self, dlg_id: str) -> str | None:
        """None, or fts-rest's 419 reason."""
        with self._lock:
            until = self._until.get(dlg_id)
        now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
        if until is None:
            return "No delegation found"
        if until - now < dt.timedelta(hours=1):
            return f"The delegated credentials has less than one hour left ({dlg_id})"
        return None
