"""A GridFTP control channel with GSI security (RFC 2228 AUTH GSSAPI / ADAT over TLS),
for gridxfer's own GridFTP uploads (``movers/gridftp/client.py``).

Why not only gfal2/globus_ftp_client: the Globus control library always asks the server to
accept a delegated proxy (GSS_C_DELEG_FLAG), and the server answers by generating a fresh
RSA key as big as the user's proxy key: 0.1-0.6 s of server CPU for 2048 bits on the
benchmark VM (``openssl genrsa 2048``), on the critical path of every new session. gfal2
then sends SITE HELP, FEAT and SITE CLIENTINFO before the first real command. Here the
session does what a file upload with an unauthenticated data channel (DCAU N) needs:
TLS mutual authentication and no delegation, with the login commands sent together with
the last handshake flight (3 round trips in all with TLS 1.3).

Security: the server's host certificate is verified against the trust directory
(``X509_CERT_DIR``, default /etc/grid-security/certificates, with its CRLs when it has
any) and the URL's host name or IP (subjectAltName, as RFC 2818). Globus' CA signing
policy files are NOT enforced here, and host certificates named only ``CN=host/...`` do
not match: any failure before login raises ``NativeUnavailable`` and the caller falls
back to gfal2, which applies the Globus rules.
"""
from __future__ import annotations

import base64
import contextlib
import re
import socket
import ssl
import time
from dataclasses import dataclass
from pathlib import Path

from gridxfer.movers.x509 import proxy_file, trust_dir

CONNECT_TIMEOUT = 30.0
REPLY_TIMEOUT = 120.0
_PASV = re.compile(r"\((\d+),(\d+),(\d+),(\d+),(\d+),(\d+)\)")
_MAX_AUTH_ROUNDS = 8


class NativeUnavailable(Exception):
    """This server (or this credential) cannot be used without Globus' own GSI code."""


class FtpError(Exception):
    """The server answered a command with a 4xx/5xx reply (``reply`` holds it)."""

    def __init__(self, command: str, reply: Reply) -> None:
        verb = command.split(" ", 1)[0]
        super().__init__(f"{verb}: {reply.code} {reply.text}")
        self.reply = reply


@dataclass(frozen=True)
class Reply:
    code: int
    text: str               # every line of the reply, joined with newlines, codes stripped

    @property
    def ok(self) -> bool:
        return self.code < 400


def _tls_context() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)     # verifies the chain and the host name
    try:
        ctx.load_verify_locations(capath=trust_dir())
        ctx.load_cert_chain(proxy_file())             # proxy cert, its key, then the chain
    except (OSError, ssl.SSLError) as exc:
        raise NativeUnavailable(f"credentials: {exc}") from None
    if any(Path(trust_dir()).glob("*.r0")):
        ctx.verify_flags |= ssl.VERIFY_CRL_CHECK_CHAIN
    return ctx


class GsiControl:
    """One authenticated, logged-in control connection. Not thread-safe: one per thread."""

    def __init__(self, host: str, port: int, *, timeout: float = REPLY_TIMEOUT,
                 after_login: tuple[str, ...] = ()) -> None:
        """``after_login``: commands sent with the login's last flight (no round trip of
        their own); their replies are ``self.after_login``."""
        self.host, self.port = host, port
        self._after = after_login
        self.after_login: list[Reply] = []
        self.sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(timeout)
        self._in = self.sock.makefile("rb")
        self._tls: ssl.SSLObject | None = None
        self._rx, self._tx = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.last_used = time.monotonic()
        try:
            self._login(_tls_context().wrap_bio(self._rx, self._tx, server_hostname=host))
        except BaseException:
            self.close()
            raise

    # -- GSI -------------------------------------------------------------------------
    # Binary type, and a data channel without GSI (DCAU N: the server would need the
    # delegated proxy this session does not give it to authenticate one).
    LOGIN = ("USER :globus-mapping:", "PASS dummy", "TYPE I", "DCAU N")

    def _login(self, tls: ssl.SSLObject) -> None:
        """TLS 1.3 (Globus 6.2 with OpenSSL 3) in 3 round trips: connect; AUTH + the
        ClientHello; our last flight, the delegation flag '0' and the login commands, all
        sent at once. TLS 1.2 takes one ADAT round trip more per handshake flight."""
        self._handshake_step(tls)
        self._send_raw("AUTH GSSAPI\r\n" + self._out("ADAT"))
        self._expect(self._raw_reply(), "banner", 220)
        self._expect(self._raw_reply(), "AUTH GSSAPI", 334)
        self._absorb(self._raw_reply())
        for _ in range(_MAX_AUTH_ROUNDS):
            if self._handshake_step(tls):
                break
            self._send_raw(self._out("ADAT"))
            self._absorb(self._raw_reply())
        else:
            raise NativeUnavailable(f"GSI handshake with {self.host} did not finish")
        lines = []
        if self._tx.pending:                      # our last flight (TLS 1.3: cert + Finished)
            lines.append(self._out("ADAT"))
        tls.write(b"0")                           # the GSI delegation flag: no delegation
        lines.append(self._out("ADAT"))
        self._tls = tls
        for command in (*self.LOGIN, *self._after):
            tls.write(command.encode() + b"\r\n")
            lines.append(self._out("ENC"))
        self._send_raw("\r\n".join(lines))
        for _ in lines[:-len(self.LOGIN) - len(self._after) - 1]:
            self._absorb(self._raw_reply())
            self._drain(tls)                      # the server's one-byte acknowledgement
        flag = self._raw_reply()
        if flag.code != 235:
            self._tls = None
            raise NativeUnavailable(f"{self.host} wants a delegated proxy (ADAT answered "
                                    f"{flag.code} {flag.text})")
        replies = {command: self.reply() for command in self.LOGIN}
        self.after_login = [self.reply() for _ in self._after]
        for command, reply in replies.items():
            if not reply.ok or (command.startswith("PASS") and reply.code != 230):
                raise NativeUnavailable(f"{command.split()[0]} refused: {reply.code} {reply.text}")

    def _handshake_step(self, tls: ssl.SSLObject) -> bool:
        try:
            tls.do_handshake()
            return True
        except ssl.SSLWantReadError:
            return False
        except ssl.SSLError as exc:
            raise NativeUnavailable(f"TLS handshake with {self.host}: {exc}") from None

    def _absorb(self, reply: Reply) -> None:
        if reply.code not in (235, 335):
            raise NativeUnavailable(f"GSI authentication refused: {reply.code} {reply.text}")
        if "ADAT=" in reply.text:
            self._rx.write(base64.b64decode(reply.text.split("ADAT=", 1)[1].strip()))

    def _out(self, verb: str) -> str:
        """``verb`` and the TLS bytes waiting to go out, base64 (an ADAT or ENC line)."""
        return f"{verb} " + base64.b64encode(self._tx.read()).decode()

    @staticmethod
    def _drain(tls: ssl.SSLObject) -> bytes:
        out = b""
        try:
            while True:
                chunk = tls.read(65536)
                if not chunk:
                    return out
                out += chunk
        except (ssl.SSLWantReadError, ssl.SSLZeroReturnError):
            return out

    # -- commands --------------------------------------------------------------------
    def pipeline(self, commands: list[str]) -> list[Reply]:
        """Send every command at once (one round trip), then read one reply each."""
        self.send(commands)
        return [self.reply() for _ in commands]

    def command(self, command: str, *, check: bool = True) -> Reply:
        reply = self.pipeline([command])[0]
        if check and not reply.ok:
            raise FtpError(command, reply)
        return reply

    def reply(self) -> Reply:
        """The next reply, unwrapped if it is protected (631/632/633)."""
        raw = self._raw_reply()
        if raw.code not in (631, 632, 633) or self._tls is None:
            return raw
        plain = self._drain_after(raw.text)
        return _parse(plain.decode("utf-8", "replace").splitlines())

    def _drain_after(self, text: str) -> bytes:
        for token in text.splitlines():
            self._rx.write(base64.b64decode(token.strip()))
        if self._tls is None:
            raise NativeUnavailable("not authenticated")
        return self._drain(self._tls)

    def send(self, commands: list[str]) -> None:
        """Send protected (ENC) commands without reading the replies."""
        if self._tls is None:
            raise NativeUnavailable("not authenticated")
        wire = []
        for command in commands:
            self._tls.write(command.encode() + b"\r\n")
            wire.append(self._out("ENC") + "\r\n")
        self.sock.sendall("".join(wire).encode())
        self.last_used = time.monotonic()

    def _send_raw(self, line: str) -> None:
        self.sock.sendall(line.encode() + b"\r\n")

    def _raw_reply(self) -> Reply:
        lines = []
        while True:
            line = self._in.readline(1 << 20)
            if not line:
                raise ConnectionResetError(f"{self.host}:{self.port} closed the control connection")
            text = line.decode("utf-8", "replace").rstrip("\r\n")
            lines.append(text)
            if len(text) >= 4 and text[:3].isdigit() and text[3] == " " and \
                    (len(lines) == 1 or text[:3] == lines[0][:3]):
                return _parse(lines)

    @staticmethod
    def _expect(reply: Reply, what: str, code: int) -> None:
        if reply.code != code:
            raise NativeUnavailable(f"{what}: {reply.code} {reply.text}")

    # -- data channel ----------------------------------------------------------------
    def passive_address(self, reply: Reply) -> tuple[str, int]:
        found = _PASV.search(reply.text)
        if reply.code != 227 or not found:
            raise FtpError("PASV", reply)
        n = [int(x) for x in found.groups()]
        host = ".".join(map(str, n[:4]))
        return (self.host if host == "0.0.0.0" else host), n[4] * 256 + n[5]

    def close(self) -> None:
        for closer in (self._in.close, self.sock.close):
            with contextlib.suppress(OSError):
                closer()


def _parse(lines: list[str]) -> Reply:
    lines = [ln for ln in lines if ln.strip()]
    last = lines[-1] if lines else "000 empty reply"
    code = int(last[:3]) if last[:3].isdigit() else 0
    body = [ln[4:] if ln[:3].isdigit() and ln[3:4] in (" ", "-") else ln.strip() for ln in lines]
    return Reply(code, "\n".join(body))
