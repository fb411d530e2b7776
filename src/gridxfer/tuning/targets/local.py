"""The local host: /proc/sys read and written directly, commands run with subprocess."""
from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence

from gridxfer.tuning.targets.base import RunResult, TuningTarget, WriteFailed, proc_path


def run_local(argv: Sequence[str], *, input: str | None = None, timeout: float = 120) -> RunResult:
    try:
        proc = subprocess.run(list(argv), input=input, capture_output=True, text=True,
                              errors="replace", timeout=timeout, check=False)   # ip echoes bytes
    except FileNotFoundError:
        return RunResult(tuple(argv), 127, "", f"{argv[0]}: command not found")
    except subprocess.TimeoutExpired:
        return RunResult(tuple(argv), 124, "", f"{argv[0]}: timed out after {timeout:.0f}s")
    return RunResult(tuple(argv), proc.returncode, proc.stdout, proc.stderr)


class LocalTarget(TuningTarget):
    label = "local"

    def read(self, keys: Sequence[str]) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for key in keys:
            try:
                with open(proc_path(key), encoding="utf-8") as fh:
                    out[key] = fh.read().rstrip("\n")
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                out[key] = None
            except OSError:
                out[key] = None
        return out

    def write(self, values: Mapping[str, str]) -> None:
        done: list[str] = []
        for key, value in values.items():
            try:
                with open(proc_path(key), "w", encoding="utf-8") as fh:
                    fh.write(value)
            except OSError as exc:
                raise WriteFailed(key, exc.strerror or str(exc), done) from None
            done.append(key)

    def run(self, argv: Sequence[str], *, input: str | None = None) -> RunResult:
        return run_local(argv, input=input)

    def session_interfaces(self) -> frozenset[str]:
        conn = os.environ.get("SSH_CONNECTION", "").split()
        dev = self._route_dev(conn[0]) if conn else None
        return frozenset({dev}) if dev else frozenset()
