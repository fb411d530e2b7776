"""A remote host over SSH (paramiko): key authentication, sudo, host keys from known_hosts.

known_hosts is read the way OpenSSH reads it (``known_hosts.py``: patterns, hashed names,
``@revoked`` honoured, ``@cert-authority`` ignored), not by paramiko's HostKeys. An unknown
host key is refused unless ``accept_unknown_host_key=True`` (the CLI's
``--accept-unknown-host-key``), which trusts it and appends one line for it to the file
(like OpenSSH's ``StrictHostKeyChecking=accept-new``). A key that differs from the recorded
one, or one marked ``@revoked``, is always refused, before authentication. Commands are
argument lists joined with ``shlex.join``.

A connection closed between two commands (an sshd restart, a firewall's idle timeout while
the admin reads a diff) is opened again once, with a warning: no command ran on it. A
session that ends during a command is an error naming why; that command is never repeated.
"""
from __future__ import annotations

import logging
import os
import shlex
from collections.abc import Sequence
from pathlib import Path

from gridxfer.errors import GridxferError
from gridxfer.tuning.targets import known_hosts as kh
from gridxfer.tuning.targets.base import CommandTarget, RunResult, TargetError

log = logging.getLogger(__name__)
_RSA_ALGORITHMS = ("rsa-sha2-512", "rsa-sha2-256", "ssh-rsa")


class HostKeyRefused(GridxferError):
    """The server's host key is unknown or does not match known_hosts."""


class HostKeyRevoked(HostKeyRefused):
    """The server's host key is marked @revoked in known_hosts."""


class SshTarget(CommandTarget):
    def __init__(self, host: str, *, user: str | None = None, port: int = 22,
                 key_filename: str | None = None, known_hosts: str | None = None,
                 accept_unknown_host_key: bool = False, sudo: bool | None = None,
                 timeout: float = 15.0,
                 global_known_hosts: Sequence[str | Path] | None = None) -> None:
        self.host, self.user, self.port = host, user, port
        self.key_filename = key_filename
        # OpenSSH's defaults: UserKnownHostsFile, then GlobalKnownHostsFile (known_hosts.py);
        # an accepted key goes to the first user file
        home = Path.home() / ".ssh"
        self.user_known_hosts = ([Path(known_hosts)] if known_hosts else
                                 [home / "known_hosts", home / "known_hosts2"])
        self.known_hosts = self.user_known_hosts[0]
        self.global_known_hosts = [Path(p) for p in (kh.SYSTEM_FILES if global_known_hosts is None
                                                     else global_known_hosts)]
        self.accept_unknown = accept_unknown_host_key
        self.timeout = timeout
        self._sudo = sudo
        self._client = None
        self.label = (
            f"ssh:{user + '@' if user else ''}{host}{':' + str(port) if port != 22 else ''}"
        )

    def _connect(self):
        if self._client is not None:
            return self._client
        import paramiko

        try:
            entries = kh.load_all(self.user_known_hosts, self.global_known_hosts)
        except OSError as exc:
            raise TargetError(f"{self.label}: cannot read {exc.filename or self.known_hosts}: "
                              f"{exc.strerror or exc}") from None
        name = kh.host_name(self.host, self.port)
        client = paramiko.SSHClient()                  # paramiko itself is given no host keys:
        client.set_missing_host_key_policy(_Policy(self, entries, name))     # _Policy decides
        try:
            client.connect(self.host, port=self.port, username=self.user,
                           key_filename=self.key_filename, look_for_keys=self.key_filename is None,
                           allow_agent=self.key_filename is None, timeout=self.timeout,
                           banner_timeout=self.timeout, auth_timeout=self.timeout,
                           transport_factory=_prefer(kh.known_types(entries, name)))
        except GridxferError:
            client.close()
            raise
        except paramiko.SSHException as exc:
            client.close()
            raise TargetError(f"{self.label}: ssh: {exc}") from None
        except (TimeoutError, OSError) as exc:
            client.close()
            raise TargetError(f"{self.label}: cannot connect: {exc}") from None
        self._client = client
        return client

    @property
    def sudo(self) -> bool:
        if self._sudo is not None:
            return self._sudo
        user = self.user or os.environ.get("USER") or ""
        return user != "root"

    def command_line(self, argv: Sequence[str]) -> str:
        full = (["sudo", "-n", "--"] if self.sudo else []) + list(argv)
        return shlex.join(full)

    def run(self, argv: Sequence[str], *, input: str | None = None) -> RunResult:
        import paramiko

        chan = self._channel(argv[0])
        try:
            chan.settimeout(self.timeout * 8)
            chan.exec_command(self.command_line(argv))
            stdin, stdout = chan.makefile_stdin("wb"), chan.makefile("r")
            stderr = chan.makefile_stderr("r")
            if input is not None:
                stdin.write(input)
            chan.shutdown_write()
            out = stdout.read().decode("utf-8", "replace")
            err = stderr.read().decode("utf-8", "replace")
            rc = chan.recv_exit_status()
            if rc == -1:                    # the channel closed with no exit status
                raise EOFError
        except (TimeoutError, OSError) as exc:
            raise TargetError(f"{self.label}: {argv[0]}: {exc}") from None
        except (paramiko.SSHException, EOFError) as exc:
            # the command may have run: never sent again
            raise TargetError(f"{self.label}: {argv[0]}: the SSH session ended: "
                              f"{_why_ended(chan.get_transport(), exc)}") from None
        finally:
            chan.close()
        return RunResult(tuple(argv), rc, out, err)

    def _channel(self, what: str):
        """A new session channel on a live connection (``_live``); should the server close
        it just as the channel is asked for, it is opened again once more."""
        import paramiko

        for attempt in (1, 2):
            transport = self._live().get_transport()
            try:
                return transport.open_session(timeout=self.timeout * 8)
            except (paramiko.SSHException, EOFError, OSError) as exc:
                why = _why_ended(transport, exc)
                if attempt == 2 or transport.is_active():
                    self.close()
                    raise TargetError(f"{self.label}: {what}: cannot open an SSH session: "
                                      f"{why}") from None
                self._dropped(why)
        raise AssertionError("unreachable")

    def _live(self):
        """The connection; one the server (or a firewall) closed since the last command is
        opened again, with a warning: no command ran on it, so nothing is repeated."""
        client = self._connect()
        transport = client.get_transport()
        if transport is not None and transport.is_active():
            return client
        self._dropped(_why_ended(transport, EOFError()))
        return self._connect()

    def _dropped(self, why: str) -> None:
        """Forget a connection the server closed; the next ``_connect`` opens a new one."""
        log.warning("%s: the SSH connection was closed (%s); connecting again",
                    self.label, why)
        self.close()

    def session_interfaces(self) -> frozenset[str]:
        client = self._live()
        local_addr = client.get_transport().sock.getsockname()[0]
        dev = self._route_dev(local_addr)
        return frozenset({dev}) if dev else frozenset()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _why_ended(transport, exc: BaseException) -> str:
    """The reason a session ended: paramiko keeps the transport thread's own exception
    (EOF from the server, a reset) and raises only "SSH session not active"."""
    cause = getattr(transport, "saved_exception", None) or exc
    if isinstance(cause, EOFError):
        return "closed by the server"
    return str(cause) or type(cause).__name__


def _prefer(types: list[str]):
    """A paramiko transport factory that negotiates the host-key types known_hosts has for
    the host first, as ssh(1) does (else the server's other key would look unknown)."""
    import paramiko

    wanted = [a for t in types for a in (_RSA_ALGORITHMS if t == "ssh-rsa" else (t,))]

    def factory(sock, **kwargs):
        transport = paramiko.Transport(sock, **kwargs)
        opts = transport.get_security_options()
        first = [a for a in wanted if a in opts.key_types]
        opts.key_types = first + [a for a in opts.key_types if a not in first]
        return transport
    return factory


class _Policy:
    """Decides on the server's key after key exchange, before authentication."""

    def __init__(self, target: SshTarget, entries: list[kh.Entry], name: str) -> None:
        self.target, self.entries, self.name = target, entries, name

    def missing_host_key(self, client, hostname, key) -> None:
        t, blob = self.target, key.asbytes()
        verdict = kh.check(self.entries, self.name, key.get_name(), blob)
        if verdict.status == kh.KNOWN:
            return
        e = verdict.entry
        at = f"{e.path or t.known_hosts}:{e.line}" if e is not None else ""
        if verdict.status == kh.REVOKED_KEY:
            raise HostKeyRevoked(f"{t.label}: host key {key.get_name()} {kh.fingerprint(blob)} is "
                                 f"marked @revoked in {at}; refusing")
        if verdict.status == kh.CHANGED:
            raise HostKeyRefused(f"{t.label}: host key does not match {at}; refusing (possible "
                                 "man-in-the-middle)")
        ca = (f" ({verdict.ca[0].path or t.known_hosts}:{verdict.ca[0].line} is a "
              "@cert-authority line, ignored: paramiko cannot verify host certificates)"
              if verdict.ca else "")
        if not t.accept_unknown:
            read = [str(p) for p in t.user_known_hosts] + [
                str(p) for p in t.global_known_hosts if p.exists()]
            raise HostKeyRefused(
                f"{t.label}: unknown host key {key.get_name()} {kh.fingerprint(blob)} (not in "
                f"{', '.join(read)}){ca}; refusing. Check it, add it to known_hosts, or pass "
                "--accept-unknown-host-key")
        where = t.known_hosts                   # the user's first file, as ssh(1)
        try:
            kh.append(where, self.name, key.get_name(), blob,
                      hashed=kh.ssh_hashes_known_hosts(t.host, t.port))
        except OSError as exc:
            raise TargetError(f"{t.label}: cannot record the host key in {where}: "
                              f"{exc.strerror or exc}") from None
