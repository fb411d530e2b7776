"""Where a client's bearer token comes from (frozen values, e.g. from a campaign file):

- :class:`FileSource`: a file holding the token; :class:`TokenReader` re-reads it when
  it changes (mtime, size or inode), so a renewed token is picked up mid-campaign;
- :class:`EnvSource`: an environment variable holding the token;
- :class:`CommandSource`: a command that prints one (``oidc-token <account>``), run
  without a shell, with a timeout; its first non-empty output line is the token;
- :class:`DiscoverySource`: the WLCG Bearer Token Discovery rules (the default when
  nothing is given): ``$BEARER_TOKEN``, then the file ``$BEARER_TOKEN_FILE``, then
  ``$XDG_RUNTIME_DIR/bt_u<euid>``, then ``/tmp/bt_u<euid>``. Empty variables and missing
  or empty files are skipped; surrounding white space is stripped (as XRootD's ztn does).

A token file that group or others may read is refused, as XRootD's ztn refuses it.
Note that gfal2 itself reads only ``BEARER_TOKEN``; XRootD's ztn follows all four rules.

API::

    tok = read_token(DiscoverySource())             # -> Token (TokenError if none)
    reader = TokenReader(FileSource("/run/tok"))    # cached; a file is re-read on change
    reader.get(min_validity=600)                    # TokenError if it expires sooner
    source_from({"command": ["oidc-token", "atlas"]})   # campaign-file form -> TokenSource
"""
from __future__ import annotations

import os
import shlex
import stat
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gridxfer.errors import UsageError
from gridxfer.redact import redact
from gridxfer.auth.tokens import Token, TokenError, check_lifetime, parse

MAX_TOKEN_BYTES = 64 * 1024


@dataclass(frozen=True)
class FileSource:
    path: str

    def describe(self) -> str:
        return f"token file {self.path}"


@dataclass(frozen=True)
class EnvSource:
    name: str

    def describe(self) -> str:
        return f"environment variable {self.name}"


@dataclass(frozen=True)
class CommandSource:
    argv: tuple[str, ...]
    timeout: float = 30.0

    def describe(self) -> str:
        return f"token command {self.argv[0] if self.argv else '?'}"


@dataclass(frozen=True)
class DiscoverySource:
    """WLCG Bearer Token Discovery (read at call time, from ``env`` or os.environ)."""

    def describe(self) -> str:
        return "WLCG bearer token discovery"


TokenSource = FileSource | EnvSource | CommandSource | DiscoverySource


def read_token(source: TokenSource, *, env: Mapping[str, str] | None = None) -> Token:
    """Read and parse a token from ``source``. TokenError if there is none."""
    env = os.environ if env is None else env
    if isinstance(source, FileSource):
        value = _read_file(Path(source.path))
        if value is None:
            raise TokenError(f"the {source.describe()} does not exist or is empty")
        return parse(value, source.describe())
    if isinstance(source, EnvSource):
        value = env.get(source.name, "").strip()
        if not value:
            raise TokenError(f"the {source.describe()} is not set or empty")
        return parse(value, source.describe())
    if isinstance(source, CommandSource):
        return parse(_run(source, env), source.describe())
    if isinstance(source, DiscoverySource):
        found = discover(env)
        if found is None:
            raise TokenError("no bearer token found (BEARER_TOKEN, BEARER_TOKEN_FILE, "
                             "$XDG_RUNTIME_DIR/bt_u<uid>, /tmp/bt_u<uid>)")
        return found
    raise TypeError(f"not a token source: {type(source).__name__}")


def discovery_candidates(env: Mapping[str, str] | None = None) -> list[tuple[str, str | Path]]:
    """The WLCG discovery order: ("env", name) or ("file", path), first match wins."""
    env = os.environ if env is None else env
    uid = os.geteuid()
    out: list[tuple[str, str | Path]] = [("env", "BEARER_TOKEN")]
    if env.get("BEARER_TOKEN_FILE"):
        out.append(("file", Path(env["BEARER_TOKEN_FILE"])))
    if env.get("XDG_RUNTIME_DIR"):
        out.append(("file", Path(env["XDG_RUNTIME_DIR"]) / f"bt_u{uid}"))
    out.append(("file", Path(f"/tmp/bt_u{uid}")))
    return out


def discover(env: Mapping[str, str] | None = None) -> Token | None:
    """The first token the WLCG discovery rules find, or None."""
    env = os.environ if env is None else env
    for kind, where in discovery_candidates(env):
        if kind == "env":
            value = env.get(str(where), "").strip()
            if value:
                return parse(value, f"environment variable {where}")
            continue
        text = _read_file(Path(where))
        if text is not None:
            return parse(text, f"token file {where}")
    return None


def _read_file(path: Path) -> str | None:
    """The stripped content of a token file; None if missing or empty."""
    try:
        st = path.stat()
        if stat.S_ISDIR(st.st_mode):
            raise TokenError(f"token file {path} is a directory")
        if st.st_size > MAX_TOKEN_BYTES:
            raise TokenError(f"token file {path} is too large ({st.st_size} bytes) for a token")
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise TokenError(f"cannot read token file {path}: {exc.strerror}") from None
    if not text:
        return None
    if st.st_mode & 0o077:
        raise TokenError(f"token file {path} is readable by others (mode {st.st_mode & 0o777:o}); "
                         f"chmod 600 {path}")
    return text


def _run(source: CommandSource, env: Mapping[str, str]) -> str:
    if not source.argv:
        raise TokenError("the token command is empty")
    try:
        res = subprocess.run(list(source.argv), capture_output=True, text=True,
                             timeout=source.timeout,
                             stdin=subprocess.DEVNULL, env=dict(env), check=False)
    except subprocess.TimeoutExpired:
        raise TokenError(
            f"the {source.describe()} did not finish within {source.timeout:g} s"
        ) from None
    except OSError as exc:
        raise TokenError(f"cannot run the {source.describe()}: {exc.strerror}") from None
    if res.returncode != 0:
        tail = redact(" ".join(res.stderr.split())[-300:]) or "no message"
        raise TokenError(f"the {source.describe()} failed (exit {res.returncode}): {tail}")
    line = next((ln.strip() for ln in res.stdout.splitlines() if ln.strip()), "")
    if not line:
        raise TokenError(f"the {source.describe()} printed no token")
    return line


class TokenReader:
    """A token source with a cache: a file is re-read only when it changed; a command
    is re-run when the cached token would expire within ``min_validity`` seconds."""

    def __init__(self, source: TokenSource, env: Mapping[str, str] | None = None) -> None:
        self.source = source
        self._env = env
        self._token: Token | None = None
        self._stamp: tuple[int, int, int] | None = None

    def get(self, min_validity: float = 0.0) -> Token:
        """The current token; TokenError if none, or if it expires within ``min_validity``
        seconds even after a re-read."""
        stamp = self._file_stamp()
        if self._needs_read(stamp, min_validity):
            self._token, self._stamp = read_token(self.source, env=self._env), stamp
        assert self._token is not None
        if min_validity:
            check_lifetime(self._token, min_validity)
        return self._token

    def _needs_read(self, stamp: tuple[int, int, int] | None, min_validity: float) -> bool:
        if self._token is None:
            return True
        if isinstance(self.source, FileSource):
            return stamp != self._stamp
        if isinstance(self.source, CommandSource):
            left = self._token.expires_in()
            return left is not None and left < min_validity
        return True     # env and discovery: cheap, and they may point elsewhere now

    def _file_stamp(self) -> tuple[int, int, int] | None:
        if not isinstance(self.source, FileSource):
            return None
        try:
            st = os.stat(self.source.path)
        except OSError:
            return (0, 0, 0)
        return (st.st_mtime_ns, st.st_size, st.st_ino)


def source_from(spec: Mapping[str, object] | None) -> TokenSource:
    """A token source from a mapping such as a campaign file's ``token:`` entry:
    ``{file: PATH}``, ``{env: NAME}``, ``{command: [argv...] or "argv string", timeout: S}``
    (split like a shell would, but never run by one), or None/``{}`` for discovery.
    UsageError otherwise."""
    if not spec:
        return DiscoverySource()
    keys = set(spec) - {"timeout"}
    if len(keys) != 1 or not keys <= {"file", "env", "command"}:
        raise UsageError(
            f"a token source is exactly one of file, env or command (got {', '.join(sorted(spec))})"
        )
    (key,) = keys
    value = spec[key]
    if key == "file" and isinstance(value, str) and value:
        return FileSource(os.path.expanduser(value))
    if key == "env" and isinstance(value, str) and value:
        return EnvSource(value)
    if key == "command":
        argv = shlex.split(value) if isinstance(value, str) else value
        timeout = spec.get("timeout", 30.0)
        if (
            not isinstance(argv, (list, tuple))
            or not argv
            or not all(isinstance(a, str) for a in argv)
        ):
            raise UsageError("token command: expected a command line or a list of arguments")
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not 0 < timeout <= 600
        ):
            raise UsageError("token command timeout: expected seconds in (0, 600]")
        return CommandSource(tuple(argv), float(timeout))
    raise UsageError(f"token {key}: expected a non-empty string")
