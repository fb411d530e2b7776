"""The ``gridxfer`` command: a root group whose subcommands live one per module.

Subcommand groups are imported lazily (``gridxfer.cli.<module>:group``) so that
``gridxfer tune ...`` does not pay for importing gfal2, and so each command family
stays in its own file. Errors are caught once, here, and mapped to exit codes by
``gridxfer.errors.exit_code_for``.
"""
from __future__ import annotations

import contextlib
import importlib
import logging
import os
import signal
import sys

import click

from gridxfer import __version__
from gridxfer.errors import GridxferError, exit_code_for
from gridxfer.cli import examples
from gridxfer.display import printable
from gridxfer.redact import redact

# command name -> (module under gridxfer.cli, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "campaign": ("campaign", "Run, resume and report bulk transfer campaigns."),
    "copy": ("copy", "Copy files one-off with the campaign's integrity (gfal-copy/xrdcp habits)."),
    "testbed": ("testbed", "Bring up an embedded grid of real XRootD/GridFTP servers."),
    "tune": ("tune", "Host tuning profiles: diff, apply, verify, rollback, advise, plan."),
    "netbench": ("netbench", "iperf3 network benchmarks between hosts."),
}


def _show_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """``gridxfer --version``: the version, and whether small XRootD files take the native
    relay (movers/xrootd/relaynative.py), read from disk without loading it."""
    if not value or ctx.resilient_parsing:
        return
    from gridxfer.movers.xrootd import native_state
    click.echo(f"gridxfer, version {__version__}")
    click.echo(f"native relay (libgxrelay.so): {native_state()}")
    ctx.exit()


def _logs_verbose(ctx: click.Context, param: click.Parameter, value: int) -> None:
    from gridxfer.cli import logs
    logs.on_verbose(ctx, param, value)


def _logs_file(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    from gridxfer.cli import logs
    logs.on_log_file(ctx, param, value)


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in SUBCOMMANDS:
            return None
        module = importlib.import_module(f"gridxfer.cli.{SUBCOMMANDS[name][0]}")
        from gridxfer.cli import complete, examples, logs
        return complete.attach(logs.add_to(examples.attach(module.group, name)))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_) for name, (_, help_) in sorted(SUBCOMMANDS.items())]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"],
                                                "max_content_width": 100})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_show_version, help="Show the version and the native relay's state.")
@click.option("-v", "--verbose", count=True, expose_value=False, callback=_logs_verbose,
              help="More log lines on stderr: -v info, -vv debug (also after any command).")
@click.option("--log-file", metavar="PATH", expose_value=False, callback=_logs_file,
              help="Append log lines to PATH (also after any command).")
def cli() -> None:
    """gridxfer moves bulk data between grid tiers and keeps the hosts that move it
    tuned and watched.

    \b
    Exit codes: 0 ok, 1 error, 2 bad input, 3 some files failed,
                4 interrupted but resumable.
    State lives under $GRIDXFER_HOME (default ~/.local/share/gridxfer).
    """
    from gridxfer import envsettings, state
    envsettings.check()     # a GRIDXFER_* number the code would not take: exit 2, here
    state.root()            # and a GRIDXFER_HOME that is relative or not a directory


examples.attach(cli, "")        # gridxfer --help: the first hour at a site


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI, turning GridxferError into one line and an exit code.

    A Ctrl-C that comes while an earlier one (or an error) is being reported still ends
    in the interrupted exit code, not a traceback; once the exit code is decided, the
    process ignores SIGINT and SIGTERM while it tears down (``leave``), so a late second
    Ctrl-C cannot turn a clean exit 4 into death by signal.

    SIGINT and SIGTERM are unblocked first: a signal mask is inherited across exec, and a
    parent whose thread had them blocked (gfal2's first context blocks nearly every signal
    in its thread) made a child campaign that no Ctrl-C or `campaign cancel` could stop."""
    if argv is None:
        with contextlib.suppress(ValueError, OSError):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        code = _main(argv)
    except KeyboardInterrupt as exc:    # a second Ctrl-C inside the first one's handler
        code = exit_code_for(exc)
    if argv is None:
        _ignore_stops()
        leave(code)
    return code


def _ignore_stops() -> None:
    with contextlib.suppress(ValueError):       # not the main thread: nothing to change
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)


def _main(argv: list[str] | None) -> int:
    from gridxfer.cli import logs
    logs.configure(0, None)         # warnings to this process's stderr; -v/--log-file add
    try:
        cli.main(args=argv, prog_name="gridxfer", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("gridxfer: interrupted", err=True)
        code = exit_code_for(KeyboardInterrupt())
    except click.exceptions.NoArgsIsHelpError as exc:   # `gridxfer campaign`: the help
        exc.show()
        code = exc.exit_code
    except click.ClickException as exc:   # click's own usage errors: exit 2, one line
        click.echo(one_line(f"gridxfer: error: {click_line(exc)}"), err=True)
        code = exc.exit_code
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except GridxferError as exc:
        for line in exc.lines():          # a campaign file's errors: all of them, one a line
            click.echo(one_line(f"gridxfer: error: {line}"), err=True)
        code = exit_code_for(exc)
    except OSError as exc:                # the environment: a full disk, a permission...
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(one_line(f"gridxfer: error: {where}{exc.strerror or exc}"), err=True)
        code = exit_code_for(exc)
    except KeyboardInterrupt as exc:
        click.echo("gridxfer: interrupted", err=True)
        code = exit_code_for(exc)
    else:
        code = 0
    return code


def one_line(text: str) -> str:
    """The error line as printed: credentials redacted, and a newline, a terminal escape
    or an undecodable byte from the user's input shown escaped (``\\n``, ``\\x1b``,
    ``\\udcff``), so the line stays one line, cannot drive the terminal, and can always
    be encoded."""
    return printable(redact(text))


def click_line(exc: click.ClickException) -> str:
    """click's usage error (normally Usage + Try + Error lines) as one line."""
    message = " ".join(exc.format_message().split())
    ctx = getattr(exc, "ctx", None)
    if ctx is None:
        return message
    return f"{ctx.command_path}: {message} (see '{ctx.command_path} --help')"


# Native client libraries whose exit-time teardown runs after gridxfer's work is done.
NATIVE_MODULES = ("XRootD.client", "gfal2")


def leave(code: int) -> None:
    """End the process with ``code``. With XrdCl or gfal2/Globus loaded, their teardown at
    interpreter exit is skipped (``os._exit``): it ran after a finished campaign and aborted
    the process once ("double free or corruption", SIGABRT), which turned "done" into a failed
    exit status, and XrdCl's finalizer can hang on a file still open (xrootd#1260). Nothing
    is lost: the journal is committed and closed, every transfer has ended or been cancelled
    (an unfinished XRootD upload is removed by the server under POSC), gridxfer's gfal2 child
    processes are stopped here, and output and logs are flushed."""
    if not any(name in sys.modules for name in NATIVE_MODULES):
        sys.exit(code)
    agents = sys.modules.get("gridxfer.movers.gfal.agent")
    if agents is not None:
        agents.stop_all()
    authz = sys.modules.get("gridxfer.movers.xrootd.authz")
    if authz is not None:
        authz.forget()          # the ztn login token file (atexit does not run after _exit)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to say
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
