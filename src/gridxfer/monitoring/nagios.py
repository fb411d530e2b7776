"""Shared plumbing for the ``check_gridxfer_*`` plugins, built on ``nagiosplugin``.

Monitoring Plugins guidelines, and where each is enforced:

- exit codes 0-3 only; one status line plus perfdata (``nagiosplugin.Check``/``Runtime``);
- ``-w/-c`` are ``nagiosplugin.Range`` strings in the guidelines' syntax, validated while
  parsing (``pluginargs.range_arg``); a value starting with ``-`` and a digit is a value, not
  an option (``-w -10:-5``, ``-W -5m`` refused as negative), as argparse does from 3.13 on;
- every text in the output goes through ``plugintext`` (one line, no ``|``, redacted);
- ``-h``/``--help``, ``-V``/``--version`` and every argument error exit 3 (UNKNOWN). argparse
  would exit 2 (CRITICAL to Nagios) through ``SystemExit``, which ``nagiosplugin.guarded``
  does not catch: :class:`PluginParser` turns both into UNKNOWN, here and nowhere else;
- ``-t`` timeout (default 10 s) aborts the probe with an UNKNOWN line (``nagiosplugin``
  raises ``Timeout`` from SIGALRM; ``guarded`` reports it);
- expected data problems (missing/garbled files, bad journals, unreadable state) become
  ``CheckError`` in :class:`GxResource` -> one UNKNOWN line, no traceback;
- ``-v`` as in the guidelines' "Verbose output" table: 0 and 1 print a single line (1 adds
  detail to it), 2 adds lines, 3 is for diagnosing the plugin (nagiosplugin's own levels
  are one lower: its 1 already adds lines; see :data:`NAGIOSPLUGIN_VERBOSITY`); tracebacks
  for real bugs appear only from ``-vv`` on (``guarded(verbose=0)``).

The stages stay apart, as nagiosplugin intends: a :class:`GxResource` collects (it reads a
source's series, keeps what it read as a frozen ``reading`` and yields metrics); contexts
judge the metrics (:class:`IdleContext` for a window with nothing in it); a
:class:`LineSummary` writes the status line from the reading; state that must outlive the
run (a baseline) is saved by :meth:`GxResource.settle`, called after evaluation.
"""
from __future__ import annotations

import argparse
import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, NoReturn
from collections.abc import Callable, Iterable

import nagiosplugin

from gridxfer import __version__
from gridxfer.errors import GridxferError
from gridxfer.monitoring.pluginargs import path_arg, range_arg, timeout_arg
from gridxfer.monitoring.plugintext import one_line, status_text

UNKNOWN = 3
# the plugin's -v count (0..3) -> nagiosplugin's verbosity (guidelines, "Verbose output")
NAGIOSPLUGIN_VERBOSITY = (0, 0, 2, 3)
_DATA_ERRORS = (GridxferError, OSError, sqlite3.Error, ValueError, KeyError, TypeError,
                json.JSONDecodeError, subprocess.SubprocessError, UnicodeError)


class PluginUsage(Exception):
    """A bad command line: reported as one UNKNOWN line (exit 3)."""


class PluginParser(argparse.ArgumentParser):
    """argparse with the Monitoring Plugins conventions (see module doc)."""

    def __init__(self, prog: str, description: str, *, thresholds: str | None = None,
                 default_warning: str | None = None, default_critical: str | None = None) -> None:
        super().__init__(prog=prog, description=description, add_help=False,
                         formatter_class=argparse.RawDescriptionHelpFormatter,
                         epilog="Thresholds are Nagios ranges ([@]start:end, '~' = -inf): "
                                "'200:' alerts below 200, '10' alerts above 10.\n"
                                "Exit codes: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN "
                                "(also for --help, --version and bad arguments).")
        # "-5m", "-10:-5", "-1GB" are values (refused or taken by their type), not unknown
        # options; argparse 3.11 only takes "-5" and "-.5" so (3.13 uses this pattern)
        self._negative_number_matcher = re.compile(r"^-\.?\d")
        std = self.add_argument_group("standard options")
        std.add_argument("-h", "--help", action="help", help="show this help and exit (3)")
        std.add_argument("-V", "--version", action="version",
                         version=f"{prog} (gridxfer) {__version__}",
                         help="print the version and exit (3)")
        std.add_argument("-v", "--verbose", action="count", default=0,
                         help="-v: more detail on the status line, -vv: detail lines, "
                              "-vvv: debug")
        std.add_argument("-t", "--timeout", type=timeout_arg, default=10, metavar="SECONDS",
                         help="abort with UNKNOWN after this many seconds (default 10, 0 = none)")
        if thresholds:
            std.add_argument("-w", "--warning", type=range_arg, default=default_warning,
                             metavar="RANGE", help=f"warning range for {thresholds}"
                             + (f" (default {default_warning})" if default_warning else ""))
            std.add_argument("-c", "--critical", type=range_arg, default=default_critical,
                             metavar="RANGE", help=f"critical range for {thresholds}"
                             + (f" (default {default_critical})" if default_critical else ""))
        std.add_argument("--prom-file", type=path_arg, metavar="PATH",
                         help="also write the metrics as a node_exporter textfile (.prom)")

    def error(self, message: str) -> NoReturn:
        raise PluginUsage(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            sys.stdout.write(message)
        sys.stdout.flush()
        sys.exit(UNKNOWN)


class GxResource(nagiosplugin.Resource):
    """A resource whose expected failures become one UNKNOWN line (``CheckError``).

    ``collect`` sets ``reading`` (what it read, for the summary) and yields the metrics."""

    reading: Any = None

    def collect(self) -> Iterable[nagiosplugin.Metric]:
        raise NotImplementedError

    def settle(self) -> None:
        """After evaluation: save what must outlive the run (default: nothing)."""

    def probe(self) -> list[nagiosplugin.Metric]:
        try:
            return list(self.collect())
        except nagiosplugin.CheckError:
            raise
        except _DATA_ERRORS as exc:
            raise nagiosplugin.CheckError(one_line(exc)) from exc


class GxCheck(nagiosplugin.Check):
    """``nagiosplugin.Check`` that can also export its metrics to a Prometheus textfile."""

    def __init__(self, *objects: Any, name: str, prom_file: Path | None = None) -> None:
        super().__init__(*objects, name=name)
        self.prom_file = prom_file

    def __call__(self) -> None:
        super().__call__()
        self._settle()
        if self.prom_file:
            from gridxfer.monitoring.prometheus import check_samples, write_textfile
            try:
                write_textfile(self.prom_file, check_samples(self.name, self))
            except OSError as exc:
                self.results.add(nagiosplugin.Result(
                    nagiosplugin.Unknown, f"cannot write --prom-file: {one_line(exc)}"))


    def _settle(self) -> None:
        """Each resource's :meth:`GxResource.settle`, once its metrics are judged. A failure
        there (an unwritable state file) makes the run UNKNOWN with one line and no perfdata,
        as a failure while probing does: the run did not complete."""
        for resource in self.resources:
            if not isinstance(resource, GxResource) or resource.reading is None:
                continue
            try:
                resource.settle()
            except _DATA_ERRORS as exc:
                resource.reading = None
                self.results = nagiosplugin.Results(
                    nagiosplugin.Result(nagiosplugin.Unknown, one_line(exc)))
                self.perfdata.clear()
                return


def run_plugin(name: str, parser: PluginParser,
               build: Callable[[argparse.Namespace], nagiosplugin.Check],
               argv: list[str] | None = None) -> NoReturn:
    """Parse, build and run a check: the one place usage errors become UNKNOWN."""
    prefix = name.upper()

    @nagiosplugin.guarded(verbose=0)
    def main() -> None:
        try:
            args = parser.parse_args(argv)
            check = build(args)
        except (PluginUsage, GridxferError) as exc:
            print(f"{prefix} UNKNOWN - {one_line(exc)} (see --help)")
            sys.exit(UNKNOWN)
        check.main(verbose=NAGIOSPLUGIN_VERBOSITY[min(args.verbose, 3)], timeout=args.timeout)

    main()
    sys.exit(UNKNOWN)   # not reached: Runtime always exits


class LineSummary(nagiosplugin.Summary):
    """Status line: the worst result first (when not OK), then the headline that
    ``describe`` writes from the resource's reading (none when the probe failed)."""

    def __init__(self, resource: GxResource,
                 describe: Callable[[Any], str] | None = None) -> None:
        self.resource = resource
        self.describe = describe

    def headline(self) -> str:
        reading = self.resource.reading
        if reading is None or self.describe is None:
            return ""
        return self.describe(reading)

    def ok(self, results: nagiosplugin.Results) -> str:
        return status_text(self.headline() or str(results[0]))

    def problem(self, results: nagiosplugin.Results) -> str:
        first = str(results.first_significant)
        head = self.headline()
        if first and head and first not in head:
            return status_text(f"{first}; {head}")
        return status_text(first or head)

    def verbose(self, results: nagiosplugin.Results) -> list[str]:
        """The detail lines of ``-vv`` (:meth:`details`), each made one clean line."""
        return [status_text(line) for line in self.details(results)]

    def details(self, results: nagiosplugin.Results) -> list[str]:
        return list(super().verbose(results) or [])


IDLE_STATES = {"ok": nagiosplugin.Ok, "warning": nagiosplugin.Warn,
               "critical": nagiosplugin.Critical, "unknown": nagiosplugin.Unknown}


class IdleContext(nagiosplugin.ScalarContext):
    """A window with nothing in it, under ``--idle STATE``: that state, whatever the value.

    The metric keeps its perfdata (no thresholds); ``describe(reading)`` gives the line."""

    def __init__(self, name: str, state: str, describe: Callable[[Any], str]) -> None:
        super().__init__(name, fmt_metric=None)
        self.state = IDLE_STATES[state]
        self.describe_idle = describe

    def evaluate(self, metric: nagiosplugin.Metric, resource: Any) -> nagiosplugin.Result:
        return nagiosplugin.Result(self.state, self.describe_idle(resource.reading), metric)
