"""The ``token:`` entries of a campaign file: where each side's bearer token comes from.

```yaml
source: {url: "davs://t0.example/data/", files: {glob: "*"},
         token: {file: ~/.tokens/t0, base: /data}}        # read by the source's server
destinations:
  - tier: T2
    pool:
      - davs://se1.example/data/
      - {url: "davs://se2.example/data/", token: {env: SE2_TOKEN}}   # this endpoint's own
    token: {command: "oidc-token atlas", timeout: 30s}     # the rest of the tier's pool
```

A source is exactly one of ``file`` (re-read whenever it changes; relative to the campaign
file), ``env`` (a variable's name) or ``command`` (an argument list or a command line, run
without a shell, with ``timeout``, default 30 s; its first output line is the token), or
``discover`` (``token: discover``: the WLCG bearer-token discovery rules, which are also
what a side without a ``token:`` gets). ``base`` is the storage path the token's scopes
are relative to (the server's ``base_path``; default ``/``). A token itself in the file
is refused: the campaign file is stored in the journal.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from yaml.nodes import Node, ScalarNode, SequenceNode

from gridxfer import limits, units
from gridxfer.redact import redact
from gridxfer.campaign.spec.model import TokenSpec
from gridxfer.campaign.spec.nodes import Checker

_KEYS = ("file", "env", "command", "discover", "timeout", "base")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_COMMAND_TIMEOUT = 600.0
NOT_HERE = ("a token does not go into the campaign file (it is stored in the journal): "
            "give {file: PATH}, {env: NAME} or {command: ...}")


def token_spec(c: Checker, node: Node, where: str, base_dir: Path) -> TokenSpec:
    """A ``token:`` entry -> TokenSpec; SpecError (file:line) for anything else."""
    if isinstance(node, ScalarNode):
        text = c.value(node, where)
        if text == "discover":
            return TokenSpec()
        if isinstance(text, str) and text.count(".") == 2 and len(text) > 40:
            raise c.fail(node, where, NOT_HERE)
        raise c.fail(node, where, "expected discover or a mapping: {file: PATH}, {env: NAME} "
                                  "or {command: ...}")
    m = c.mapping(node, where, _KEYS)
    kinds = [k for k in ("file", "env", "command", "discover") if k in m]
    if len(kinds) != 1:
        raise c.fail(node, where, "give exactly one of file, env, command or discover"
                                  + (f" (got {', '.join(kinds)})" if kinds else ""))
    (kind,) = kinds
    base = "/"
    if "base" in m:
        base = c.string(m["base"], f"{where}.base")
        if not base.startswith("/") or ".." in base.split("/"):
            raise c.fail(m["base"], f"{where}.base", f"expected an absolute path, got {base!r}")
    timeout = 30.0
    if "timeout" in m:
        if kind != "command":
            raise c.fail(m["timeout"], f"{where}.timeout", "only a token command has a timeout")
        timeout = c.parsed(m["timeout"], f"{where}.timeout", units.parse_duration,
                           positive=True, limit=limits.MAX_DURATION)
        if timeout > MAX_COMMAND_TIMEOUT:
            raise c.fail(m["timeout"], f"{where}.timeout",
                         f"at most {units.fmt_duration(MAX_COMMAND_TIMEOUT)}")
    if kind == "discover":
        if c.value(m["discover"], f"{where}.discover") is not True:
            raise c.fail(m["discover"], f"{where}.discover", "expected true")
        return TokenSpec(base=base)
    if kind == "file":
        text = c.string(m["file"], f"{where}.file")
        path = Path(os.path.expanduser(text))
        path = path if path.is_absolute() else base_dir / path
        if path.is_dir():
            raise c.fail(m["file"], f"{where}.file", f"{path} is a directory, not a token file")
        return TokenSpec(file=str(path), base=base)
    if kind == "env":
        name = c.string(m["env"], f"{where}.env")
        if not _ENV_NAME.fullmatch(name):
            raise c.fail(m["env"], f"{where}.env",
                         NOT_HERE if name.count(".") == 2 else f"not a variable name: {name!r}")
        return TokenSpec(env=name, base=base)
    return TokenSpec(command=_argv(c, m["command"], f"{where}.command"), timeout=timeout,
                     base=base)


def _argv(c: Checker, node: Node, where: str) -> tuple[str, ...]:
    import shlex
    if isinstance(node, SequenceNode):
        argv = [c.string(n, f"{where}[{i}]") for i, n in enumerate(node.value)]
    else:
        text = c.string(node, where)
        try:
            argv = shlex.split(text)
        except ValueError as exc:
            raise c.fail(node, where, f"cannot split the command line: {exc}") from None
    if not argv:
        raise c.fail(node, where, "the command is empty")
    if any(redact(a) != a for a in argv):       # a token (or key) on the command line
        raise c.fail(node, where, "the command line carries a credential: it would be stored "
                                  "in the journal and seen in the process list; " + NOT_HERE)
    if shutil.which(argv[0]) is None:
        raise c.fail(node, where, f"no such command: {argv[0]!r}")
    return tuple(argv)


def pool_entry(c: Checker, node: Node, where: str,
               base_dir: Path) -> tuple[Node, TokenSpec | None]:
    """A pool entry: a URL (or endpoint name), or ``{url: ..., token: ..., name: ...}``: the
    URL's node and the endpoint's own token source (``name``: ``Checker.given_name``)."""
    if isinstance(node, ScalarNode):
        return node, None
    m = c.mapping(node, where, ("url", "token", "name"), required=("url",))
    tok = token_spec(c, m["token"], f"{where}.token", base_dir) if "token" in m else None
    return m["url"], tok
