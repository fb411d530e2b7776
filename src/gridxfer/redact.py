"""Credentials never leave the process: one redaction function for every sink.

``redact(text)`` masks what grid clients treat as a credential wherever it appears in a
string (URLs, error messages of gfal2/XrdCl/globus-url-copy, exception text):

- the password of a URL's userinfo: ``root://bob:hunter2@host`` -> ``root://bob:***@host``
  (a bare login name, ``root://gx3p1@host``, is not a secret and stays), also without
  ``//``: ``ssh:bob:hunter2@host`` and a word ``bob:hunter2@host``;
- the value of a credential-carrying query key, also percent-encoded
  (``?authz=...``, ``%3Fauthz%3D...``): see ``CREDENTIAL_KEYS``;
- ``Authorization: <value>`` header text and ``Bearer <token>``;
- a JSON Web Token (WLCG/SciTokens are JWTs: ``eyJ...``);
- a PEM private key block.

It is applied where text leaves the process: journal writes (``campaign.journal``,
``campaign.ledger``), the CLI's error line and JSON, reports (text, JSON, PNG labels),
Nagios status lines and perfdata labels, Prometheus names and labels, and the argument
lists of child processes. A value is replaced by ``***``, never removed, so the output
still shows that a credential was there; punctuation that ends it (``authz=..., retrying``)
is the text's and stays. Every pattern stops at ``"`` and ``\\``, so
redacting JSON text keeps it valid JSON.

``credential_in_url(url)`` tells campaign-file validation what to refuse (exit 2), and
``WHERE_CREDENTIALS_GO`` is the one sentence that says where credentials belong instead.
"""
from __future__ import annotations

import logging
import re
from typing import Any

from gridxfer.display import printable

MASK = "***"

# Query keys that carry a credential, lower case. Sources:
# - authz: XRootD's token CGI (xroot and XrdHttp; SciTokens/WLCG tokens). XRootD itself
#   obfuscates "authz=" in its logs (XrdOucUtils obfuscateAuth).
# - access_token: RFC 6750 2.3, the bearer token as a URI query parameter.
# - bearer_token, token: bearer tokens under other names.
# - xrd.gsiusrpxy: the proxy file gfal2's xrootd plugin appends as CGI (strings of
#   libgfal_plugin_xrootd.so, gfal2 2.21); a path to a private key is as good as the key.
# - tpc.key: the rendezvous key of an XRootD third-party copy.
# - x-amz-signature, x-amz-credential, x-amz-security-token, signature, awsaccesskeyid:
#   S3 pre-signed URLs (https/davs through davix); sig: Azure SAS.
CREDENTIAL_KEYS = ("authz", "access_token", "bearer_token", "token", "xrd.gsiusrpxy",
                   "tpc.key", "x-amz-signature", "x-amz-credential", "x-amz-security-token",
                   "signature", "awsaccesskeyid", "sig")

WHERE_CREDENTIALS_GO = (
    "credentials do not go into URLs (they would be stored in the journal and shown in "
    "reports, metrics and process lists): use a grid proxy (X509_USER_PROXY, default "
    "/tmp/x509up_u<uid>) or a bearer token (BEARER_TOKEN or BEARER_TOKEN_FILE, read by "
    "gfal2 and XRootD's ztn); XRootD's pwd protocol reads the file named by XrdSecNETRC; "
    "~/.netrc is read by none of gfal2, XrdCl or globus-url-copy")

_KEYS = "|".join(re.escape(k) for k in sorted(CREDENTIAL_KEYS, key=len, reverse=True))
_VALUE = r"[^&\s\"'<>#\\]*"
# key=value after a separator (?, &, ;, space...) or its percent-encoding (%3F, %26)
_QUERY = re.compile(r"(?i)(?:(?<=%3f)|(?<=%26)|(?<![\w.%-]))(" + _KEYS + r")(=|%3d)" + _VALUE)
# The look-behind and \b anchor each match at the start of a word: without them a long
# run of letters (a 200 kB value in a campaign file) was scanned from every position
# (quadratic: minutes).
_USERINFO = re.compile(r"(?i)(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*://[^/?#@\s:\"\\]*)"
                       r":[^/?#\s\"\\]*@")
# the same without ``//``: an SSH host spec (``ssh:bob:pw@host``, tune's --host) and a bare
# ``bob:pw@host`` at the start of a word (a Nagios -H, an argument echoed in quotes)
_SSH_USERINFO = re.compile(r"(?i)(?<![a-z0-9+.-])(ssh:[^/?#@\s:\"\\]*):[^/?#@\s\"\\]*@")
_BARE_USERINFO = re.compile(r"(?:^|(?<=[\s'\"=(\[]))(?!(?i:ssh):)([A-Za-z0-9._-]+):"
                            r"[^\s/?#@:'\"\\]+@(?=[A-Za-z0-9\[])")
_AUTH_HEADER = re.compile(r"(?i)(\b\w*authorization\s*:\s*)(?:(?:bearer|basic|negotiate)\s+)?"
                          r"[^\s\"\\]+")
_BEARER = re.compile(r"(?i)\b(bearer(?:\s+|%20|\+))[A-Za-z0-9._~+/=-]{6,}")
# A JWT is three base64url parts; its first part is a JSON object: '{"' encodes as "eyJ",
# '{ "' as "eyA", '{\n' as "ewo", '{\r\n' as "ew0". It is found anywhere, also inside a
# word ("%20eyJ...", "Bearer%2520eyJ...", "tok_eyJ..."). The rarer prefixes are masked
# only when the first part really decodes to a JSON object (host names like
# "ewok-01.cern.ch" stay).
_JWT = re.compile(r"(eyJ|eyA|ewo|ew0)([A-Za-z0-9_-]{4,})\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")
_PEM = re.compile(r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----(?:(?!-----END)[^\"\\])*"
                  r"(?:-----END [A-Z0-9 ]*PRIVATE KEY-----)?")


def may_hold_one(t: str) -> bool:
    """Cheap pre-check (substring tests, 0.2 us): text with none of these cannot match a
    pattern above. Most text (URLs without credentials) stops here. Texts joined with a
    newline can be checked at once: a join only adds hits, never hides one."""
    return ("@" in t or "=" in t or "%3" in t or "earer" in t or "EARER" in t
            or "uthorization" in t or "UTHORIZATION" in t or "eyJ" in t or "eyA" in t
            or "ewo" in t or "ew0" in t or "PRIVATE KEY" in t)


# Punctuation that ends a sentence or a bracket after a value ("?authz=TOKEN, retrying",
# "(token=TOKEN)."): it is the text's, not the secret's, and stays. A value with such a
# character inside ("authz=a,b") is masked whole: only its trailing run is kept.
_TRAILING = ",;.:!?)]}"


def _query_mask(m: re.Match[str]) -> str:
    value = m.group(0)[len(m.group(1)) + len(m.group(2)):]
    kept = value[len(value.rstrip(_TRAILING)):]
    return f"{m.group(1)}{m.group(2)}{MASK}{kept}"


def _jwt_mask(m: re.Match[str]) -> str:
    if m.group(1) == "eyJ" or _json_object(m.group(1) + m.group(2)):
        return MASK
    return m.group(0)


def _json_object(part: str) -> bool:
    import base64
    import json
    try:
        obj = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(obj, dict)


def redact(text: str) -> str:
    """``text`` with every credential masked (``***``); other text unchanged."""
    if not text or not may_hold_one(text):
        return text
    text = _PEM.sub(f"-----BEGIN \\1PRIVATE KEY----- {MASK}", text)
    text = _USERINFO.sub(rf"\1:{MASK}@", text)
    text = _SSH_USERINFO.sub(rf"\1:{MASK}@", text)
    text = _BARE_USERINFO.sub(rf"\1:{MASK}@", text)
    text = _QUERY.sub(_query_mask, text)
    text = _AUTH_HEADER.sub(rf"\1{MASK}", text)
    text = _BEARER.sub(rf"\1{MASK}", text)
    return _JWT.sub(_jwt_mask, text)


def redact_obj(obj: Any) -> Any:
    """``redact`` applied to every string inside lists, tuples and dicts (keys too)."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {redact_obj(k): redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(redact_obj(v) for v in obj) if not hasattr(obj, "_fields") \
            else type(obj)(*(redact_obj(v) for v in obj))
    return obj


def credential_in_url(url: str) -> str | None:
    """What credential ``url`` carries (for a refusal message), or None.

    Answers ``"a password"`` (``user:pass@``) or ``"the query key 'authz'"``; the message
    shows the URL only through ``redact``."""
    if _USERINFO.search(url):
        return "a password (user:password@)"
    q = _QUERY.search(url)
    if q:
        return f"the credential {q.group(1).lower()}="
    if _JWT.search(url) or _BEARER.search(url):
        return "a bearer token"
    return None


class RedactFilter(logging.Filter):
    """Formats the message once, redacted and on one line (a file name holding a newline
    or a terminal escape is shown escaped); the record then carries no arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = printable(redact(record.getMessage()))
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        record.exc_info = None
        return True
