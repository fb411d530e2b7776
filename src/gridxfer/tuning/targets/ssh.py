"""A remote host over SSH (paramiko): key authentication, sudo, host keys from known_hosts.

An unknown host key is refused unless ``accept_unknown_host_key=True`` (the CLI's
``--accept-unknown-host-key``), which trusts it and records it in the known_hosts file
(like OpenSSH's ``StrictHostKeyChecking=accept-new``). A key that differs from the recorded
one is always refused. Commands are argument lists joined with ``shlex.join``.
"""
from __future__ import annotations

import os
import shlex
import socket
from collections.abc import Sequence
from pathlib import Path

from ...errors import GridxferError
from .base import CommandTarget, RunResult, TargetError


class HostKeyRefused(GridxferError):
    """The server's host key is unknown or does not match known_hosts."""


class SshTarget(CommandTarget):
    def __init__(self, host: str, *, user: str | None = None, port: int = 22,
                 key_filename: str | None = None, known_hosts: str | None = None,
                 accept_unknown_host_key: bool = False, sudo: bool | None = None,
                 timeout: float = 15.0) -> None:
        self.host, self.user, self.port = host, user, port
        self.key_filename = key_filename
        self.known_hosts = Path(known_hosts or Path.home() / ".ssh" / "known_hosts")
        self.accept_unknown = accept_unknown_host_key
        self.timeout = timeout
        self._sudo = sudo
        self._client = None
        self.label = f"ssh:{user + '@' if user else ''}{host}{':' + str(port) if port != 22 else ''}"

    def _connect(self):
        if self._client is not None:
            return self._client
        import paramiko

        client = paramiko.SSHClient()
        if self.known_hosts.exists():
            client.load_host_keys(str(self.known_hosts))
        client.set_missing_host_key_policy(
            paramiko.AutoAddPolicy() if self.accept_unknown else paramiko.RejectPolicy())
        try:
            client.connect(self.host, port=self.port, username=self.user,
                           key_filename=self.key_filename, look_for_keys=self.key_filename is None,
                           allow_agent=self.key_filename is None, timeout=self.timeout,
                           banner_timeout=self.timeout, auth_timeout=self.timeout)
        except paramiko.BadHostKeyException:
            client.close()
            raise HostKeyRefused(f"{self.label}: host key does not match {self.known_hosts}; "
                                 "refusing (possible man-in-the-middle)") from None
        except paramiko.SSHException as exc:
            client.close()
            if "not found in known_hosts" in str(exc):
                raise HostKeyRefused(
                    f"{self.label}: unknown host key (not in {self.known_hosts}); refusing. "
                    "Check it, add it to known_hosts, or pass --accept-unknown-host-key") from None
            raise TargetError(f"{self.label}: ssh: {exc}") from None
        except (OSError, socket.timeout) as exc:
            client.close()
            raise TargetError(f"{self.label}: cannot connect: {exc}") from None
        if self.accept_unknown:
            self.known_hosts.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            client.save_host_keys(str(self.known_hosts))
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
        client = self._connect()
        try:
            stdin, stdout, stderr = client.exec_command(self.command_line(argv),
                                                        timeout=self.timeout * 8)
            if input is not None:
                stdin.write(input)
            stdin.channel.shutdown_write()
            out = stdout.read().decode("utf-8", "replace")
            err = stderr.read().decode("utf-8", "replace")
            rc = stdout.channel.recv_exit_status()
        except (OSError, socket.timeout) as exc:
            raise TargetError(f"{self.label}: {argv[0]}: {exc}") from None
        return RunResult(tuple(argv), rc, out, err)

    def session_interfaces(self) -> frozenset[str]:
        client = self._connect()
        local_addr = client.get_transport().sock.getsockname()[0]
        dev = self._route_dev(local_addr)
        return frozenset({dev}) if dev else frozenset()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
