"""The "Examples:" of every command's ``--help``, in one table: how a site admin who knows
FTS3, gfal-copy, xrdcp and tuned would run it, with a site's values.

``attach`` appends each one to its command's help text (before the options, as the
testbed group's "Typical use:") when ``cli/main`` loads a command group, as
``logs.add_to`` adds the logging options; tests/cli/
test_help_examples.py holds that every command has one and that each example parses
against its command (its options exist, its values are of their types).
"""
from __future__ import annotations

import inspect

import click

_TAG = "\nExamples:\n"


# command path (under `gridxfer`) -> example lines; a `# ...` comment says what one does
EXAMPLES: dict[str, tuple[str, ...]] = {
    "": (                       # `gridxfer --help`: the first hour at a site
        "# try it first on an embedded grid of real servers (`gridxfer testbed down` ends it)",
        "gridxfer testbed up && eval \"$(gridxfer testbed env)\"",
        "# the transfer host: what a profile would change, then apply it (originals saved)",
        "gridxfer tune diff dtn-10g --host ssh:root@dtn01.cnaf.example",
        "gridxfer tune apply dtn-10g --host ssh:root@dtn01.cnaf.example",
        "# a campaign: the plan and a probe of every endpoint first, then the run",
        "gridxfer campaign run --dry-run sc-t0-t1.yaml",
        "gridxfer campaign run sc-t0-t1.yaml",
        "gridxfer campaign status sc-t0-t1 --failed",
        "# one file, as with gfal-copy or xrdcp",
        "gridxfer copy root://t0.example//store/run1.root davs://se01.t1.example:2880/store/",
    ),
    "campaign": (
        "gridxfer campaign run --dry-run sc-t0-t1.yaml    # plan, probe: nothing moved",
        "gridxfer campaign run sc-t0-t1.yaml",
        "gridxfer campaign status sc-t0-t1                # from another terminal",
        "gridxfer campaign resume sc-t0-t1                # after Ctrl-C, a reboot or a crash",
        "gridxfer campaign verify sc-t0-t1                # every done file at its destination",
        "gridxfer campaign report sc-t0-t1 --png sc-t0-t1.png",
    ),
    "tune": (
        "gridxfer tune list                               # the profiles, from the field studies",
        "gridxfer tune diff dtn-10g --iface ens1f0        # this host against a profile",
        "gridxfer tune apply dtn-10g --iface ens1f0       # diff, save, write, read back",
        "gridxfer tune verify dtn-10g --iface ens1f0      # drift: exit 1",
        "gridxfer tune rollback --iface ens1f0            # the saved originals back",
    ),
    "netbench": (
        "gridxfer netbench rtt t0-se01 t1a-se01 -c 50",
        "gridxfer netbench tcp t0-se01 t1a-se01 -P 4 -t 10",
        "gridxfer netbench compare t0-se01 t1a-se01 --before untuned-legacy --after dtn-10g",
    ),
    "copy": (
        "# like gfal-copy: EOS to a local disk, adler32 compared at both ends",
        "gridxfer copy root://eosatlas.cern.ch//eos/atlas/scratch/AOD.root /data/scratch/",
        "# server to server (TPC), 4 streams, overwrite; the adler32 the source must have",
        "gridxfer copy --tpc -f -p 4 -K adler32:0a1b2c3d \\",
        "    root://t0.example:1094//store/raw/run1.root root://se01.t1.example//store/",
        "# several files into a dCache WebDAV directory, each given 2 h at most",
        "gridxfer copy -t 2h run1.root run2.root davs://dcache.t2.example:2880/pnfs/cms/store/",
        "# check sources and destinations as a copy would; copy nothing",
        "gridxfer copy --dry-run gsiftp://se01.t1.example/data/run1.root /data/scratch/",
    ),
    "campaign run": (
        "gridxfer campaign run --dry-run sc-t0-t1.yaml    # the plan; each endpoint probed once",
        "gridxfer campaign run sc-t0-t1.yaml              # live progress on a terminal",
        "gridxfer campaign run --quiet sc-t0-t1.yaml      # from cron: the summary only",
        "# passive Nagios alerts while it runs: below 100 MB/s for 10 minutes",
        "gridxfer campaign run sc-t0-t1.yaml --alert-cmd-file /var/lib/nagios4/rw/nagios.cmd \\",
        "    --alert-floor 100MB/s --alert-window 10m",
        "# hand the files to an FTS3 server instead of moving them from this host",
        "gridxfer campaign run --fts3 https://fts3-pilot.cern.ch:8446 sc-t0-t1.yaml",
    ),
    "campaign resume": (
        "gridxfer campaign resume sc-t0-t1                # after Ctrl-C, a reboot or a crash",
        "gridxfer campaign resume sc-t0-t1 --dry-run      # what is left to do",
        "# after editing the campaign file (say `overwrite: true`): apply it, retry the failed",
        "gridxfer campaign resume sc-t0-t1 --reload --retry-failed",
        "gridxfer campaign resume sc-t0-t1 --quiet --retry-cancelled",
    ),
    "campaign status": (
        "gridxfer campaign status sc-t0-t1",
        "gridxfer campaign status sc-t0-t1 --links        # concurrency per link, and why",
        "gridxfer campaign status sc-t0-t1 --tier T1-CNAF --failed --since 2h",
        "gridxfer campaign status sc-t0-t1 --json | jq .files",
    ),
    "campaign report": (
        "gridxfer campaign report sc-t0-t1",
        "gridxfer campaign report sc-t0-t1 --png /var/www/html/sc/sc-t0-t1.png",
        "gridxfer campaign report sc-t0-t1 --endpoint 'gsiftp://se02.cnaf.example/*' \\",
        "    --since 2026-11-24T10:00Z",
        "gridxfer campaign report sc-t0-t1 --json > sc-t0-t1-report.json",
    ),
    "campaign verify": (
        "gridxfer campaign verify sc-t0-t1                # read-only, like rclone check",
        "gridxfer campaign verify sc-t0-t1 --tier T1-CNAF --checkers 16",
        "# put the missing and differing files back to pending, then copy them again",
        "gridxfer campaign verify sc-t0-t1 --fix && gridxfer campaign resume sc-t0-t1",
    ),
    "campaign cancel": (
        "gridxfer campaign cancel sc-t0-t1                # running: SIGTERM, up to 60 s",
        "gridxfer campaign cancel sc-t0-t1 --wait 5m      # give a busy run 5 minutes to stop",
        "gridxfer campaign resume sc-t0-t1 --retry-cancelled   # later: run them after all",
    ),
    "campaign list": (
        "gridxfer campaign list",
        "gridxfer campaign list --json | jq -r '.[].name'",
    ),
    "tune list": (
        "gridxfer tune list",
        "gridxfer tune list --json",
    ),
    "tune show": (
        "gridxfer tune show dtn-100g                      # every key, and which file sets it",
        "gridxfer tune show ./wan-cern-bnl.conf",
        "gridxfer tune show dtn-10g --ansible-vars > host_vars/dtn01.cnaf.example.yml",
    ),
    "tune diff": (
        "gridxfer tune diff dtn-100g --iface ens1f0       # this host against the profile",
        "gridxfer tune diff dtn-10g --host ssh:root@dtn01.cnaf.example",
        "gridxfer tune diff dtn-10g -i /etc/ansible/hosts --host dtn01 --host dtn02",
    ),
    "tune apply": (
        "gridxfer tune apply dtn-100g --iface ens1f0 --dry-run",
        "gridxfer tune apply dtn-100g --iface ens1f0 --persist   # and /etc/sysctl.d, for boot",
        "gridxfer tune apply dtn-10g -i /etc/ansible/hosts --host dtn01 --host dtn02",
    ),
    "tune verify": (
        "gridxfer tune verify dtn-100g --iface ens1f0     # exit 1 on drift: cron, Nagios",
        "gridxfer tune verify dtn-10g --host ssh:root@dtn01.cnaf.example --json",
    ),
    "tune rollback": (
        "gridxfer tune rollback --dry-run                 # what the saved originals restore",
        "gridxfer tune rollback --iface ens1f0",
        "gridxfer tune rollback --host ssh:root@dtn01.cnaf.example",
    ),
    "tune advise": (
        "gridxfer tune advise --bandwidth 10Gbit/s --rtt 18ms",
        "gridxfer tune advise --bandwidth 100G --rtt 150ms --streams 8 \\",
        "    --write-profile wan-cern-bnl.conf",
    ),
    "tune plan": (
        "gridxfer tune plan --rate 200MB/s --tape-drive-rate 15-20MB/s --buffer 50TB",
        "gridxfer tune plan --rate 1GB/s --tape-target 600MB/s --tape-drive-rate 400MB/s",
    ),
    "testbed up": (
        "gridxfer testbed up                              # the loopback grid",
        "gridxfer testbed up --throttle t1a-xrd2=20MB/s --size-limit t1b-xrd=50MB",
        "gridxfer testbed up examples/topology-sc.yaml    # tiers in namespaces, WAN emulated",
    ),
    "testbed down": (
        "gridxfer testbed down --dry-run",
        "gridxfer testbed down",
    ),
    "testbed status": (
        "gridxfer testbed status",
        "gridxfer testbed status --json",
    ),
    "testbed env": (
        "eval \"$(gridxfer testbed env)\"",
        "gridxfer testbed env --token-lifetime 1h > testbed.env",
    ),
    "testbed token": (
        "gridxfer testbed token --scope storage.read:/ --scope storage.create:/up --lifetime 1h",
        "export BEARER_TOKEN=$(gridxfer testbed token --scope storage.modify:/)",
    ),
    "testbed exec": (
        "gridxfer testbed exec t1a-se01 -- xrdfs root://localhost:1094 ls /data",
        "gridxfer testbed exec local -- gfal-ls davs://localhost:8443/data/",
    ),
    "netbench tcp": (
        "gridxfer netbench tcp t0-se01 t1a-se01 -P 4 -t 30s -r 5 --omit 2s",
        "gridxfer netbench tcp t0-se01 t1a-se02 --histogram runs -r 20 --bin-width 25Mbit",
    ),
    "netbench udp": (
        "gridxfer netbench udp t0-se01 t1a-se01 --rate 900Mbit -t 10s",
    ),
    "netbench rtt": (
        "gridxfer netbench rtt t0-se01 t1b-se01 -c 20",
    ),
    "netbench matrix": (
        "gridxfer netbench matrix",
        "gridxfer netbench matrix t0-se01 t1a-se01 t1b-se01 -P 4",
    ),
    "netbench compare": (
        "gridxfer netbench compare t0-se01 t1a-se01 --before untuned-legacy --after dtn-10g \\",
        "    -r 5 --png untuned-vs-dtn-10g.png",
    ),
}


def section(lines: tuple[str, ...]) -> str:
    r"""The section as click shows it: ``\b`` keeps the lines as written."""
    return "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in lines)


def attach(cmd: click.Command, path: str) -> click.Command:
    """Give ``cmd`` (at ``path``, e.g. "campaign"; "" for gridxfer itself) and every command
    under it its examples."""
    if isinstance(cmd, click.Group):         # cli/main's lazy root lists none here
        for name, sub in cmd.commands.items():
            attach(sub, f"{path} {name}".strip())
    if path in EXAMPLES and _TAG not in (cmd.help or ""):
        # the docstring's indentation off first: click dedents the help as a whole
        cmd.help = f"{inspect.cleandoc(cmd.help or '')}\n\n{section(EXAMPLES[path])}"
    return cmd
