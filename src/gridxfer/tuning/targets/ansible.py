"""A host of an Ansible inventory: sysctls written by ``playbooks/tune.yml``
(``ansible.posix.sysctl``), everything else through the ``command`` module with an argv list.

Nothing gridxfer passes reaches Ansible as a template: values, argv and stdin travel in an
extra-vars file whose strings are all tagged ``!unsafe`` (``export.unsafe_yaml``), and the
ad-hoc module arguments only name those variables.
"""
from __future__ import annotations

import contextlib
import json
import os
import shlex
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from gridxfer.tuning.export import unsafe_yaml
from gridxfer.tuning.targets.base import CommandTarget, RunResult, TargetError, WriteFailed

PLAYBOOK = Path(__file__).resolve().parents[4] / "playbooks" / "tune.yml"
RUNTIME_FILE = "/run/gridxfer/sysctl-runtime.conf"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({"ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "json",
                "ANSIBLE_RETRY_FILES_ENABLED": "0", "ANSIBLE_NOCOLOR": "1",
                "ANSIBLE_DEPRECATION_WARNINGS": "0"})
    env.setdefault("ANSIBLE_PIPELINING", "1")
    return env


@contextlib.contextmanager
def unsafe_vars_file(variables: dict) -> Iterator[str]:
    """A private (0600) extra-vars file for ``-e @FILE``, every string ``!unsafe``."""
    fd, path = tempfile.mkstemp(prefix="gridxfer-ansible-", suffix=".yml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(unsafe_yaml(variables))
        yield path
    finally:
        os.unlink(path)


class AnsibleTarget(CommandTarget):
    def __init__(self, host: str, inventory: str, *, playbook: str | None = None,
                 check: bool = False, runtime_file: str = RUNTIME_FILE) -> None:
        self.host, self.inventory = host, inventory
        self.runtime_file = runtime_file
        self.playbook = Path(playbook) if playbook else PLAYBOOK
        self.check = check
        self.label = f"ansible:{host}"

    def _ansible(self, argv: list[str]) -> dict:
        import subprocess

        try:
            proc = subprocess.run(argv, capture_output=True, text=True, env=_env(), timeout=300,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TargetError(f"{self.label}: {argv[0]}: {exc}") from None
        try:
            return json.loads(proc.stdout[proc.stdout.find("{"):])
        except ValueError:
            msg = (proc.stderr or proc.stdout).strip().splitlines()
            raise TargetError(
                f"{self.label}: {argv[0]} failed: {msg[-1] if msg else proc.returncode}"
            ) from None

    def _host_results(self, data: dict) -> list[dict]:
        out = []
        for play in data.get("plays", []):
            for task in play.get("tasks", []):
                res = task.get("hosts", {}).get(self.host)
                if res is not None:
                    out.append(res)
        if not out:
            raise TargetError(f"{self.label}: host not in inventory {self.inventory}")
        for res in out:
            if res.get("unreachable"):
                raise TargetError(f"{self.label}: unreachable: {res.get('msg', '').strip()}")
        return out

    def run(self, argv: Sequence[str], *, input: str | None = None) -> RunResult:
        if any("$" in a or a.startswith("~") for a in argv):
            raise TargetError(f"{self.label}: ansible's command module would expand $VAR/~ in "
                              f"{shlex.join(argv)}; refusing")
        variables: dict = {"gridxfer_argv": list(argv)}
        args: dict[str, object] = {"argv": "{{ gridxfer_argv }}"}
        if input is not None:
            variables["gridxfer_stdin"] = input
            args.update(stdin="{{ gridxfer_stdin }}", stdin_add_newline=False)
        with unsafe_vars_file(variables) as vars_file:
            data = self._ansible(["ansible", self.host, "-i", self.inventory, "-e", f"@{vars_file}",
                                  "-m", "ansible.builtin.command", "-a", json.dumps(args)])
        res = self._host_results(data)[-1]
        rc = res.get("rc", 1 if res.get("failed") else 0)
        return RunResult(tuple(argv), int(rc), res.get("stdout", ""),
                         res.get("stderr", "") or ("" if rc == 0 else res.get("msg", "")))

    def session_interfaces(self) -> frozenset[str]:
        """The interface routing back to the controller's SSH connection (SSH_CONNECTION)."""
        res = self.run(["printenv", "SSH_CONNECTION"])
        client = res.stdout.split()[:1] if res.ok else []
        dev = self._route_dev(client[0]) if client else None
        return frozenset({dev}) if dev else frozenset()

    def playbook_argv(self, vars_file: str) -> list[str]:
        argv = ["ansible-playbook", "-i", self.inventory, "-l", self.host, str(self.playbook),
                "-e", f"@{vars_file}"]
        return argv + (["--check", "--diff"] if self.check else [])

    def write(self, values: Mapping[str, str]) -> None:
        if not values:
            return
        variables = {"gridxfer_profile": "runtime",
                     "gridxfer_sysctl": [{"name": k, "value": v} for k, v in values.items()],
                     "gridxfer_sysctl_file": self.runtime_file}
        with unsafe_vars_file(variables) as vars_file:
            data = self._ansible(self.playbook_argv(vars_file))
        done: list[str] = []
        for res in self._host_results(data):
            for item in res.get("results", []) if isinstance(res.get("results"), list) else []:
                name = (item.get("item") or {}).get("name") if isinstance(item, dict) else None
                if name is None:
                    continue
                if item.get("failed"):
                    raise WriteFailed(name, str(item.get("msg", "failed")).strip(), done)
                done.append(name)
            if res.get("failed") and not done:
                raise WriteFailed(next(iter(values)), str(res.get("msg", "failed")).strip())
