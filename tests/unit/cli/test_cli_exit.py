"""How the ``gridxfer`` process ends: with a native client library loaded (XrdCl, gfal2),
its exit-time teardown is skipped (it once aborted a finished campaign with "double free or
corruption"), yet the exit status, the output and gridxfer's own clean-up stay."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def _run(body: str) -> subprocess.CompletedProcess:
    script = textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)


PRELUDE = """
import atexit, sys
{imports}
atexit.register(lambda: print("TEARDOWN RAN", file=sys.stderr, flush=True))
sys.argv = ["gridxfer", *{args!r}]
from gridxfer.cli.main import main
main()
"""


@pytest.mark.parametrize("native", ["from XRootD import client", "import gfal2"])
def test_native_teardown_is_skipped_and_the_exit_status_and_output_kept(native):
    ok = _run(PRELUDE.format(imports=native, args=["--version"]))
    assert ok.returncode == 0, ok.stderr
    assert "gridxfer" in ok.stdout and "version" in ok.stdout     # flushed into the pipe
    assert "TEARDOWN RAN" not in ok.stderr

    bad = _run(PRELUDE.format(imports=native, args=["campaign", "status", "no-such-campaign"]))
    assert bad.returncode not in (0, -6), bad.stderr
    assert "no-such-campaign" in bad.stderr
    assert "TEARDOWN RAN" not in bad.stderr


def test_without_native_libraries_the_interpreter_exits_normally():
    res = _run(PRELUDE.format(imports="", args=["--version"]))
    assert res.returncode == 0
    assert "TEARDOWN RAN" in res.stderr


def test_gfal2_children_are_stopped_when_the_teardown_is_skipped():
    res = _run(PRELUDE.format(imports="""
import gfal2
import gridxfer.movers.gfal.agent as agents
agents.stop_all = lambda: print("AGENTS STOPPED", file=sys.stderr, flush=True)
""", args=["--version"]))
    assert res.returncode == 0
    assert "AGENTS STOPPED" in res.stderr
    assert "TEARDOWN RAN" not in res.stderr


INTERRUPTED = """
import os, signal, sys, time, click
import gridxfer.cli.main as m
def stopped(*a, **k):
    raise KeyboardInterrupt
m.cli.main = stopped
{patch}
sys.argv = ["gridxfer", "campaign", "run", "x.yaml"]
m.main()
"""

# the message of the first Ctrl-C is being printed when the second comes
SECOND_WHILE_REPORTING = """
real_echo = click.echo
def echo(msg=None, *a, **k):
    if msg == "gridxfer: interrupted" and not getattr(echo, "done", False):
        echo.done = True
        raise KeyboardInterrupt
    real_echo(msg, *a, **k)
click.echo = echo
"""

# the second Ctrl-C comes while the process tears down, the exit code decided
SECOND_DURING_TEARDOWN = """
def leave(code):
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.3)
    sys.exit(code)
m.leave = leave
"""


@pytest.mark.parametrize("patch", [SECOND_WHILE_REPORTING, SECOND_DURING_TEARDOWN],
                         ids=["while-reporting", "during-teardown"])
def test_a_second_ctrl_c_still_ends_in_the_interrupted_exit_code(patch):
    """CI once saw a double Ctrl-C end a campaign by signal (-2) instead of exit 4."""
    res = _run(INTERRUPTED.format(patch=textwrap.dedent(patch)))
    assert res.returncode == 4, (res.returncode, res.stderr)
    assert "Traceback" not in res.stderr


def test_version_does_not_load_the_native_relay():
    """--version reads the relay's state from disk: loading libgxrelay.so would bring XrdCl
    and its exit-time teardown into a process that never copies."""
    report = ("try:\n    main()\nfinally:\n    print('LOADED' if 'gridxfer.movers.xrootd."
              "relayabi' in sys.modules else 'NOT LOADED', file=sys.stderr, flush=True)")
    res = _run(PRELUDE.format(imports="", args=["--version"]).replace("main()", report))
    assert res.returncode == 0 and "native relay" in res.stdout
    assert "NOT LOADED" in res.stderr
