"""Running fuzz cases in-process and judging them by the one-line rule.

The rule, per entry point:

- ``gridxfer``: exit 0 (the input happened to be valid), 2 (bad input) or 1 (environment);
  on a failure stderr is exactly ONE line, ``gridxfer: error: ...``, and there is no
  ``Traceback`` anywhere. When the input file is at fault (exit 2) the line names it
  (``path:`` or ``path:line:``); a campaign file with several errors gives one such line
  per error (issue 22), each ``gridxfer: error: `` and naming the file. click's usage
  errors follow the same rule (one line,
  ``gridxfer: error: gridxfer campaign run: No such option ... (see ... --help)``); the
  one exception is a group called without a command (``gridxfer tune``): its help, exit 2.
- ``check_gridxfer_*`` (Nagios): exit 0-3, bad usage exits 3 (UNKNOWN), stdout's first
  line is the status line ``NAME STATE ...``, and no traceback.
"""
from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from gridxfer.cli.main import main as gx_main


@dataclass
class Outcome:
    code: int | None
    out: str
    err: str
    crash: str | None = None           # an exception that escaped (a traceback for a user)


@dataclass
class Tally:
    cases: int = 0
    by_code: dict[int | None, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def add(self, case: str, outcome: Outcome, problem: str | None) -> None:
        self.cases += 1
        self.by_code[outcome.code] = self.by_code.get(outcome.code, 0) + 1
        if problem:
            self.problems.append(f"{case}: {problem}\n    exit={outcome.code} "
                                 f"stderr={outcome.err[:300]!r} stdout={outcome.out[:200]!r}"
                                 + (f"\n    {outcome.crash}" if outcome.crash else ""))

    def report(self, family: str) -> str:
        codes = ", ".join(f"exit {k}: {v}" for k, v in sorted(self.by_code.items(),
                                                              key=lambda kv: str(kv[0])))
        head = f"{family}: {self.cases} cases ({codes}), {len(self.problems)} problems"
        return "\n".join([head, *self.problems[:25]])


def _captured(call: Callable[[], int | None], other_exit: int) -> Outcome:
    """``call()`` in this process with stdout and stderr captured: its exit code (a
    SystemExit's, ``other_exit`` for a non-integer one), or the exception that escaped."""
    out, err = io.StringIO(), io.StringIO()
    crash = None
    code: int | None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = call()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else other_exit
        except BaseException as exc:     # noqa: BLE001 - that is what we look for
            code, crash = None, f"{type(exc).__name__}: {str(exc)[:300]}"
    return Outcome(code, out.getvalue(), err.getvalue(), crash)


def run_gx(argv: list[str]) -> Outcome:
    """``gridxfer ARGV`` in this process, as the console script runs it."""
    return _captured(lambda: gx_main(argv), 1)


def judge_gx(o: Outcome, allowed: set[int], names: tuple[str, ...] = ()) -> str | None:
    """The one-line rule for ``gridxfer`` (see module doc); None when it holds."""
    if o.crash:
        return f"escaped exception {o.crash}"
    if "Traceback" in o.out or "Traceback" in o.err:
        return "traceback in the output"
    if o.code not in allowed:
        return f"exit {o.code}, expected one of {sorted(allowed)}"
    if o.code == 0:
        return None
    lines = o.err.splitlines()
    several = o.code == 2 and len(lines) > 1 and bool(names)    # every error of a file
    if (len(lines) != 1 and not several) or not o.err.endswith("\n"):
        return f"{len(lines)} lines on stderr, expected exactly one"
    for line in lines:
        if not line.startswith("gridxfer: error: "):
            return "stderr line does not start with 'gridxfer: error: '"
        if names and o.code == 2 and not any(n in line for n in names):
            return f"the line names none of {names}"
    return None


STATUS_RE = re.compile(r"^[A-Z_]+ (OK|WARNING|CRITICAL|UNKNOWN)\b")


def run_check(module, argv: list[str]) -> Outcome:
    """A ``check_gridxfer_*`` main() in this process (nagiosplugin's Runtime is a
    process-wide singleton: it is reset so each case starts as a fresh process would)."""
    import nagiosplugin.runtime
    nagiosplugin.runtime.Runtime.instance = None

    def call() -> int:
        module.main(argv)
        return 0
    return _captured(call, 3)


def judge_check(o: Outcome, allowed: set[int]) -> str | None:
    if o.crash:
        return f"escaped exception {o.crash}"
    if "Traceback" in o.out or "Traceback" in o.err:
        return "traceback in the output"
    if o.code not in allowed:
        return f"exit {o.code}, expected one of {sorted(allowed)}"
    first = o.out.splitlines()[0] if o.out else ""
    if not STATUS_RE.match(first):
        return "first line of stdout is not a Nagios status line"
    if o.code == 3 and (len(o.out.splitlines()) != 1 or o.err):
        return "UNKNOWN must be exactly one line on stdout and nothing on stderr"
    return None
