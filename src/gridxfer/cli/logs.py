"""``-v``/``-vv`` and ``--log-file`` on every ``gridxfer`` command.

The options are added to each command by ``main.LazyGroup`` (``add_to``), so they work
where a user types them: ``gridxfer -v campaign run f.yaml`` and
``gridxfer campaign run -vv --log-file run.log f.yaml`` alike. They configure the
``gridxfer`` logger only (the standard library's ``logging``; nothing of our own):

- stderr: warnings by default, INFO with ``-v``, DEBUG with ``-vv``;
- ``--log-file PATH``: appended, INFO (DEBUG with ``-vv``), timestamped in UTC ISO 8601.

Every record passes ``redact`` before any handler formats it: no token, password or
private key reaches a log line, whatever a message or its arguments held.
"""
from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any

import click

from gridxfer.errors import UsageError
from gridxfer.redact import RedactFilter

LOGGER = "gridxfer"
_TAG = "_gridxfer_cli"          # marks the handlers this module installed
# Libraries that log without a handler of their own would reach stderr through
# logging.lastResort, unformatted and unredacted: paramiko prints "Socket exception:
# Connection reset by peer (104)" before the ssh target's own line that says the same.
# Their causes reach the user in gridxfer's errors and warnings instead.
QUIET_LIBRARIES = ("paramiko",)


class _Stderr(logging.StreamHandler):
    """stderr as it is when a record comes: rich's live view redirects it, so a log line
    prints above the live table instead of tearing it."""

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


class _UTC(logging.Formatter):
    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        ms = int(record.msecs)
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{ms:03d}Z"


def configure(verbosity: int, log_file: str | None) -> None:
    """Install (or replace) the CLI's handlers on the ``gridxfer`` logger."""
    logger = logging.getLogger(LOGGER)
    for h in [h for h in logger.handlers if getattr(h, _TAG, False)]:
        logger.removeHandler(h)
        h.close()
    level = {0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG)
    stderr = _Stderr()
    stderr.setLevel(level)
    stderr.setFormatter(logging.Formatter("gridxfer: %(levelname)s: %(message)s"))
    handlers: list[logging.Handler] = [stderr]
    if log_file:
        path = Path(log_file)
        if not path.parent.is_dir():
            raise UsageError(f"--log-file {log_file}: no such directory: {path.parent}")
        try:
            fh = logging.FileHandler(path, mode="a", encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--log-file {log_file}: {exc.strerror or exc}") from None
        fh.setLevel(min(level, logging.INFO))
        fh.setFormatter(_UTC("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handlers.append(fh)
    for h in handlers:
        h.addFilter(RedactFilter())
        setattr(h, _TAG, True)
        logger.addHandler(h)
    logger.setLevel(min(h.level for h in handlers))
    for name in QUIET_LIBRARIES:
        lib = logging.getLogger(name)
        if not lib.handlers:
            lib.addHandler(logging.NullHandler())


def _settings(ctx: click.Context) -> dict[str, Any]:
    root = ctx.find_root()
    if not isinstance(root.meta.get(_TAG), dict):
        root.meta[_TAG] = {"verbosity": 0, "log_file": None}
    return root.meta[_TAG]


def on_verbose(ctx: click.Context, param: click.Parameter, value: int) -> None:
    if value:
        s = _settings(ctx)
        s["verbosity"] += value
        configure(s["verbosity"], s["log_file"])


def on_log_file(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value:
        s = _settings(ctx)
        s["log_file"] = value
        configure(s["verbosity"], s["log_file"])


def options() -> list[click.Option]:
    return [
        click.Option(["-v", "--verbose"], count=True, expose_value=False, callback=on_verbose,
                     help="More log lines on stderr: -v info, -vv debug."),
        click.Option(["--log-file"], metavar="PATH", default=None, expose_value=False,
                     callback=on_log_file,
                     help="Append log lines (info, or debug with -vv) to PATH."),
    ]


def add_to(cmd: click.Command) -> click.Command:
    """Give ``cmd`` and every command under it the logging options (once)."""
    if getattr(cmd, _TAG, False):
        return cmd
    names = {o for p in cmd.params for o in getattr(p, "opts", ())}
    if not names & {"-v", "--verbose", "--log-file"}:
        cmd.params.extend(options())
    setattr(cmd, _TAG, True)
    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            add_to(sub)
    return cmd
