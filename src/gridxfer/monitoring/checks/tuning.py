"""check_gridxfer_tuning: drift of a host's sysctl/NIC settings against a tuning profile.

Uses ``gridxfer.tuning.api.verify(profile, target)`` (read-only: nothing is written).
-w/-c are ranges on the number of drifted settings (default -w 0: any drift warns).
Targets: local, netns:NAME, ssh:[USER@]HOST[:PORT] (host keys from known_hosts).
"""
from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

import nagiosplugin

from gridxfer.monitoring.nagios import (GxCheck, GxResource, LineSummary, PluginParser,
                                        run_plugin)
from gridxfer.tuning.settings import iface_problem

NAME = "tuning"
_MAX_LISTED = 3


class Tuning(GxResource):
    """Collects: the read-only verify result (the reading)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    def collect(self) -> Iterator[nagiosplugin.Metric]:
        from gridxfer.tuning.api import load_profile, verify
        from gridxfer.tuning.hosts import SshOptions, make_target
        a = self.args
        target = make_target(a.target, ssh=SshOptions(key_filename=a.ssh_key,
                                                      known_hosts=a.known_hosts))
        skip_global = a.skip_global if a.skip_global is not None else \
            a.target.startswith("netns:")
        res = verify(load_profile(a.profile), target, ifaces=tuple(a.iface),
                     skip_global=skip_global)
        self.reading = res
        yield nagiosplugin.Metric("drifted", len(res.drifted), min=0, max=res.checked,
                                  context="drift")
        yield nagiosplugin.Metric("checked", res.checked, min=0, context="info")
        yield nagiosplugin.Metric("skipped", len(res.skipped), min=0, context="info")


def describe(res: Any, listed: int = _MAX_LISTED) -> str:
    """The status line (the summary's part) from ``tuning.api.verify``'s result, naming
    the first ``listed`` drifted settings (-v: all of them, still on the one line)."""
    n = len(res.drifted)
    head = f"profile {res.profile} on {res.host}: "
    if n:
        shown = ", ".join(f"{d.key}={_short(d.actual)} (want {_short(d.expected)})"
                          for d in res.drifted[:listed])
        more = f" and {n - listed} more" if n > listed else ""
        head += f"{n} of {res.checked} setting(s) drifted: {shown}{more}"
    else:
        head += f"{res.checked} setting(s) as in the profile"
    if res.skipped:
        head += f", {len(res.skipped)} skipped"
    return head


def _short(value: object) -> str:
    text = "unset" if value is None else " ".join(str(value).split())
    return text if len(text) <= 40 else text[:37] + "..."


class TuningSummary(LineSummary):
    def details(self, results: nagiosplugin.Results) -> list[str]:
        res = self.resource.reading
        if res is None:
            return []
        return [f"drift: {d.key} expected {d.expected!r} actual {d.actual!r}"
                for d in res.drifted]


def iface_arg(text: str) -> str:
    """A Linux interface name (tuning.settings.iface_problem: the kernel's rule)."""
    if iface_problem(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not an interface name")
    return text


def build_parser() -> PluginParser:
    p = PluginParser("check_gridxfer_tuning", __doc__, thresholds="drifted settings",
                     default_warning="0", default_critical=None)
    g = p.add_argument_group("profile and host")
    g.add_argument("-P", "--profile", required=True, help="profile name or .conf path")
    g.add_argument("-H", "--target", default="local",
                   help="local (default), netns:NAME or ssh:[USER@]HOST[:PORT]")
    g.add_argument("-i", "--iface", action="append", default=[], type=iface_arg,
                   help="interface for NIC settings (repeatable)")
    g.add_argument("--skip-global", dest="skip_global", action="store_true", default=None,
                   help="skip keys that are global to the host (default for netns:)")
    g.add_argument("--no-skip-global", dest="skip_global", action="store_false")
    g.add_argument("--ssh-key", help="SSH private key")
    g.add_argument("--known-hosts", help="known_hosts file")
    return p


def build(args: argparse.Namespace) -> nagiosplugin.Check:
    res = Tuning(args)
    listed = _MAX_LISTED if args.verbose == 0 else 10**6
    return GxCheck(res,
                   nagiosplugin.ScalarContext("drift", args.warning, args.critical,
                                              fmt_metric="{value} drifted"),
                   nagiosplugin.ScalarContext("info"),
                   TuningSummary(res, lambda r: describe(r, listed)), name=NAME,
                   prom_file=args.prom_file)


def main(argv: list[str] | None = None) -> None:
    run_plugin(NAME, build_parser(), build, argv)

