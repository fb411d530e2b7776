"""Plugin plumbing: argument errors and --help/--version are UNKNOWN (3), ranges, labels."""
from __future__ import annotations

import argparse

import nagiosplugin
import pytest

from gridxfer.monitoring.nagios import (GxResource, PluginParser, PluginUsage, duration_arg,
                                        one_line, perf_label, range_arg)


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
    assert one_line(ValueError("a\nb | c")) == "a b / c"


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
