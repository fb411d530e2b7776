"""known_hosts read the way OpenSSH reads it (sshd(8), "SSH_KNOWN_HOSTS FILE FORMAT").

paramiko's HostKeys stops with a traceback at a ``@revoked`` or ``@cert-authority`` line, and
saving through it rewrites the whole file without the comments and key types it does not
know. This module only reads the file and appends to it:

- blank lines, ``#`` comments, malformed lines and key types nobody here knows are skipped
  (and left in the file untouched);
- host patterns are comma-separated, with ``*`` / ``?`` wildcards and ``!`` negation, matched
  case-insensitively against ``host`` (port 22) or ``[host]:port``; a hashed field
  (``|1|salt|hmac-sha1``) names one host;
- ``@revoked``: that key is never accepted, whatever host patterns the line has (stricter
  than ssh(1), which reads the line for the hosts it names only);
- ``@cert-authority``: ignored, because paramiko cannot verify host certificates; a refusal
  says so when such a line names the host;
- a key accepted with ``--accept-unknown-host-key`` is appended as one line, hashed when
  ssh(1)'s own configuration says ``HashKnownHosts yes`` (``ssh -G``), every other byte of
  the file kept.
- the user's file (or files) first, then the system's (``SYSTEM_FILES``, OpenSSH's default
  ``GlobalKnownHostsFile``), all read as one set, as ssh(1)'s ``check_host_key`` does; a
  system file that is missing or unreadable is skipped, and nothing is ever written there.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
from dataclasses import dataclass
from pathlib import Path

from gridxfer.tuning.targets.local import run_local

REVOKED, CERT_AUTHORITY = "@revoked", "@cert-authority"
SYSTEM_FILES = (Path("/etc/ssh/ssh_known_hosts"), Path("/etc/ssh/ssh_known_hosts2"))
KNOWN, CHANGED, UNKNOWN, REVOKED_KEY = "known", "changed", "unknown", "revoked"


@dataclass(frozen=True)
class Entry:
    marker: str | None          # REVOKED, CERT_AUTHORITY or None
    hosts: str                  # the host-pattern field as written
    key_type: str
    blob: bytes
    line: int
    path: str = ""              # the file it came from

    def names(self, name: str) -> bool:
        return matches(self.hosts, name)


@dataclass(frozen=True)
class Verdict:
    status: str                 # KNOWN, CHANGED, UNKNOWN or REVOKED_KEY
    entry: Entry | None = None  # the line that decided (revoked / changed)
    ca: tuple[Entry, ...] = ()  # @cert-authority lines naming the host (ignored)


def host_name(host: str, port: int) -> str:
    return host.lower() if port == 22 else f"[{host.lower()}]:{port}"


def hash_name(name: str, salt: bytes | None = None) -> str:
    salt = salt if salt is not None else os.urandom(20)
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


def _wildcard(pattern: str, name: str) -> bool:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, name, re.S) is not None


def matches(hosts: str, name: str) -> bool:
    """OpenSSH's match_hostname: any positive pattern and no negated one."""
    if hosts.startswith("|"):
        parts = hosts.split("|")
        if len(parts) != 4 or parts[1] != "1":
            return False
        try:
            salt = base64.b64decode(parts[2], validate=True)
        except (binascii.Error, ValueError):
            return False
        return hmac.compare_digest(hash_name(name, salt), hosts)
    found = False
    for pattern in hosts.lower().split(","):
        negated = pattern.startswith("!")
        if _wildcard(pattern[1:] if negated else pattern, name):
            if negated:
                return False
            found = True
    return found


def parse(text: str, path: str = "") -> list[Entry]:
    entries = []
    for no, raw in enumerate(text.splitlines(), 1):
        fields = raw.split()
        if not fields or fields[0].startswith("#"):
            continue
        marker = None
        if fields[0].startswith("@"):
            marker, fields = fields[0], fields[1:]
            if marker not in (REVOKED, CERT_AUTHORITY):
                continue                     # ssh(1) skips a line with an unknown marker
        if len(fields) < 3:
            continue
        try:
            blob = base64.b64decode(fields[2], validate=True)
        except (binascii.Error, ValueError):
            continue
        entries.append(Entry(marker, fields[0], fields[1], blob, no, path))
    return entries


def load(path: Path) -> list[Entry]:
    try:
        return parse(path.read_bytes().decode("utf-8", "surrogateescape"), str(path))
    except FileNotFoundError:
        return []


def load_all(user: list[Path], system: list[Path]) -> list[Entry]:
    """The user's files (an unreadable one raises OSError), then the system's (skipped when
    they cannot be read, as ssh(1) does)."""
    entries = [e for path in user for e in load(path)]
    for path in system:
        try:
            entries += load(path)
        except OSError:
            continue
    return entries


def check(entries: list[Entry], name: str, key_type: str, blob: bytes) -> Verdict:
    revoked = next((e for e in entries if e.marker == REVOKED and e.blob == blob), None)
    if revoked:
        return Verdict(REVOKED_KEY, revoked)
    mine = [e for e in entries if e.marker is None and e.names(name)]
    ca = tuple(e for e in entries if e.marker == CERT_AUTHORITY and e.names(name))
    if any(e.blob == blob for e in mine):
        return Verdict(KNOWN)
    same_type = next((e for e in mine if e.key_type == key_type), None)
    if same_type:
        return Verdict(CHANGED, same_type, ca)
    return Verdict(UNKNOWN, None, ca)


def known_types(entries: list[Entry], name: str) -> list[str]:
    """Key types recorded for ``name``, in file order (to negotiate those first)."""
    out: list[str] = []
    for e in entries:
        if e.marker is None and e.names(name) and e.key_type not in out:
            out.append(e.key_type)
    return out


def fingerprint(blob: bytes) -> str:
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def ssh_hashes_known_hosts(host: str, port: int) -> bool:
    """What ssh(1) would do for this host: ``HashKnownHosts`` from ``ssh -G``."""
    res = run_local(["ssh", "-G", "-p", str(port), "--", host], timeout=10)
    return res.ok and any(line.split()[:2] == ["hashknownhosts", "yes"]
                          for line in res.stdout.splitlines())


def append(path: Path, name: str, key_type: str, blob: bytes, *, hashed: bool) -> str:
    """Append one entry for ``name``; every byte already in the file stays as it was."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    line = f"{hash_name(name) if hashed else name} {key_type} {base64.b64encode(blob).decode()}\n"
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = "\n" + line               # the last line had no newline: keep it intact
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    return line.strip()
