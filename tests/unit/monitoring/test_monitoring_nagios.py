"""Plugin plumbing: argument errors and --help/--version are UNKNOWN (3), ranges, labels."""
from __future__ import annotations

import argparse

import nagiosplugin
import pytest

from gridxfer.monitoring.nagios import GxResource, PluginParser, PluginUsage
from gridxfer.monitoring.pluginargs import duration_arg, path_arg, range_arg, timestamp_arg
from gridxfer.monitoring.plugintext import one_line, perf_label, status_text


def parser() -> PluginParser:
    return PluginParser("check_x", "doc", thresholds="MB/s", default_warning="80")


def test_usage_errors_raise_instead_of_exit_2():
    p = parser()
    for argv in (["--nope"], ["-w", "x"], ["-c", "5:1"], ["-t", "-3"], ["-t", "1.5"]):
        with pytest.raises(PluginUsage):
            p.parse_args(argv)


@pytest.mark.parametrize("flag", ["-h", "--help", "-V", "--version"])
def test_help_and_version_exit_3(flag, capsys):
    with pytest.raises(SystemExit) as exc:
        parser().parse_args([flag])
    assert exc.value.code == 3
    assert capsys.readouterr().out.strip()


def test_defaults_and_ranges():
    args = parser().parse_args([])
    assert (args.timeout, args.verbose, str(args.warning), args.critical) == (10, 0, "80", None)
    args = parser().parse_args(["-vv", "-t", "0", "-w", "200:", "-c", "@10:20"])
    assert args.verbose == 2 and args.timeout == 0
    assert 150 not in args.warning and 250 in args.warning
    assert 15 not in args.critical and 25 in args.critical
    for bad in ("abc", "10:5", "nan", "1:2:3", "~"):
        with pytest.raises(argparse.ArgumentTypeError):
            range_arg(bad)
    assert range_arg("~:10").start == float("-inf")
    assert duration_arg("5m") == 300.0
    for bad in ("0", "-1", "soon"):
        with pytest.raises(argparse.ArgumentTypeError):
            duration_arg(bad)


def test_labels_and_messages():
    assert perf_label("ep_root://se1.example:1094_MBps") == "ep_root://se1.example:1094_MBps"
    assert perf_label("a'b=c d|e") == "a_b_c_d_e"
    err = FileNotFoundError(2, "No such file or directory", "/x/y")
    assert one_line(err) == "/x/y: No such file or directory"
    # guidelines, "Plugin Output for Nagios": one line; a '|' would start the perfdata
    assert one_line(ValueError("a\nb | c")) == "a b \u00a6 c"
    assert status_text("x\x1b[31m\udcff\r\n\ty|z  ") == "x?[31m? y\u00a6z"
    assert status_text("root://h//f?authz=hunter2, retry") == "root://h//f?authz=***, retry"
    assert perf_label("drive|1\n'x'=y") == "drive_1_x_y"


def test_ranges_follow_the_guidelines_syntax():
    """guidelines, "Threshold and ranges": [@]start:end, start 0 and ':' may go, end
    infinity may go, '~' is -infinity; anything else is refused with the expected form
    (nagiosplugin's own parser took ' 5', '1_000' and Arabic-Indic digits, and answered
    'abc' with Python's int() message)."""
    for good, inside, outside in (("10", 5, 11), ("10:", 10, 9), ("~:10", -1e9, 11),
                                  ("10:20", 15, 21), ("@10:20", 9, 10), ("-10:-5", -7, -4),
                                  ("1.5:", 2, 1), (":5", 0, -1), ("+5", 5, 6)):
        rng = range_arg(good)
        assert inside in rng and outside not in rng, good
    for bad in ("abc", "1e3", " 5", "5 ", "1_000", "\u0663", "1:2:3", "~", "~:~", "10:5",
                "9" * 400, "9" * 5000, "@@1", "1:x", "nan", "inf:"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"range"):
            range_arg(bad)
    with pytest.raises(PluginUsage) as exc:
        parser().parse_args(["-w", "abc"])
    assert str(exc.value) == ("argument -w/--warning: 'abc' is not a range ([@]start:end, "
                              "e.g. 10, 200:, ~:10, @10:20)")
    assert "..." in str(pytest.raises(argparse.ArgumentTypeError, range_arg, "9" * 5000).value)


def test_values_starting_with_a_minus_are_values_not_options():
    """'-w -10:-5' is a range (argparse 3.11 took only '-5' and '-.5' as values, and said
    'expected one argument' for the rest); a negative window is refused as one."""
    args = parser().parse_args(["-w", "-10:-5", "-c", "-1:"])
    assert (str(args.warning), str(args.critical)) == ("-10:-5", "-1:")
    p = PluginParser("check_x", "doc")
    p.add_argument("-W", type=duration_arg)
    with pytest.raises(PluginUsage, match="not a duration: '-5m'"):
        p.parse_args(["-W", "-5m"])


def test_paths_and_times_are_refused_when_empty_or_not_a_time():
    for bad in ("", " "):
        with pytest.raises(argparse.ArgumentTypeError, match="empty path"):
            path_arg(bad)
    with pytest.raises(PluginUsage, match="--prom-file: empty path"):
        parser().parse_args(["--prom-file", ""])
    assert timestamp_arg("1800000000.5") == 1800000000.5
    for bad in ("nan", "inf", "-1", "1e400", "soon", "99999999999999"):
        with pytest.raises(argparse.ArgumentTypeError, match="not a time"):
            timestamp_arg(bad)


def test_resource_errors_become_check_errors():
    class Broken(GxResource):
        def collect(self):
            raise OSError(13, "Permission denied", "/state")
            yield

    with pytest.raises(nagiosplugin.CheckError, match="/state: Permission denied"):
        Broken().probe()

    class Buggy(GxResource):
        def collect(self):
            raise ZeroDivisionError("bug")
            yield

    with pytest.raises(ZeroDivisionError):     # real bugs are not hidden as UNKNOWN data
        Buggy().probe()
