"""Every option's bad value: exit 2 and one line that names the option, while click parses
the command line (cli/params.py), before the command does anything -- for each numeric,
duration, rate and size option of every command, and for the files a command will write
(--alert-cmd-file, --write-profile, --png) when their directory does not exist."""
from __future__ import annotations

import os

import click
import pytest

from gridxfer.cli.main import cli, main

# (argv, the option as click names it, a fragment of why). Each is refused before the
# command runs: no campaign "nope", testbed or iperf3 server is needed.
BAD_VALUES = [
    (["copy", "-t", "abc", "/etc/hosts", "OUT"], "'-t' / '--timeout'", "not a duration: 'abc'"),
    (["copy", "-t", "0s", "/etc/hosts", "OUT"], "'-t' / '--timeout'", "must be more than 0"),
    (["copy", "-t", "99d", "/etc/hosts", "OUT"], "'-t' / '--timeout'", "above the limit 7d"),
    (["copy", "-p", "many", "/etc/hosts", "OUT"], "'-p' / '--streams'", "not a whole number"),
    (["copy", "-p", "999", "/etc/hosts", "OUT"], "'-p' / '--streams'", "above the limit 64"),
    (["campaign", "run", "C", "--alert-cmd-file", "CMD", "--alert-floor", "abc"],
     "'--alert-floor'", "not a byte rate: 'abc'"),
    (["campaign", "run", "C", "--alert-cmd-file", "CMD", "--alert-floor", "0"],
     "'--alert-floor'", "must be more than 0"),
    (["campaign", "run", "C", "--alert-cmd-file", "CMD", "--alert-floor", "-5"],
     "'--alert-floor'", "must be more than 0"),
    (["campaign", "run", "C", "--alert-cmd-file", "CMD", "--alert-floor", "5",
      "--alert-window", "0s"], "'--alert-window'", "must be more than 0"),
    (["campaign", "run", "C", "--alert-cmd-file", "CMD", "--alert-floor", "5",
      "--alert-window", "2y"], "'--alert-window'", "not a duration"),
    (["campaign", "run", "C", "--alert-cmd-file", "CMD", "--alert-baseline", "nan"],
     "'--alert-baseline'", "strictly between 0 and 1"),
    (["campaign", "run", "C", "--alert-cmd-file", "CMD", "--alert-baseline", "1.5"],
     "'--alert-baseline'", "strictly between 0 and 1"),
    (["campaign", "run", "C", "--alert-cmd-file", "CMD", "--alert-tape-wait", "0s"],
     "'--alert-tape-wait'", "must be more than 0"),
    (["campaign", "run", "C", "--alert-cmd-file", "CMD", "--alert-floor", "5",
      "--alert-host", "se01;RESTART_PROGRAM"], "'--alert-host'", "must not contain ';'"),
    (["campaign", "resume", "nope", "--on-drop", "true", "--alert-floor", "fast"],
     "'--alert-floor'", "not a byte rate"),
    (["campaign", "resume", "nope", "--on-drop", "true", "--alert-floor", "5",
      "--alert-window", "0s"], "'--alert-window'", "must be more than 0"),
    (["campaign", "cancel", "nope", "--wait", "soon"], "'--wait'", "not a duration"),
    (["campaign", "status", "nope", "--since", "999d"], "'--since'", "above the limit 7d"),
    (["campaign", "report", "nope", "--since", "yesterday"], "'--since'", "ISO 8601"),
    (["netbench", "tcp", "a", "b", "--omit", "abc"], "'--omit'", "not a duration"),
    (["netbench", "tcp", "a", "b", "--bin-width", "0"], "'--bin-width'", "more than 0"),
    (["netbench", "tcp", "a", "b", "-t", "0s"], "'--duration' / '-t'", "more than 0"),
    (["netbench", "udp", "a", "b", "--rate", "0"], "'--rate' / '-b'", "more than 0"),
    (["netbench", "udp", "a", "b", "--rate", "1M", "-l", "0"], "'--length' / '-l'",
     "not in the range 64<=x<=65000"),
    (["netbench", "matrix", "-t", "0s"], "'--duration' / '-t'", "more than 0"),
    (["testbed", "env", "--token-lifetime", "abc"], "'--token-lifetime'", "not a duration"),
    (["testbed", "up", "--dry-run", "--size-limit", "t1b-xrd=0"], "'--size-limit'",
     "more than 0"),
    (["testbed", "up", "--dry-run", "--throttle", "t1a-xrd2=fast"], "'--throttle'",
     "not a byte rate"),
    (["tune", "advise", "--bandwidth", "1G", "--rtt", "18ms", "--headroom", "nan"],
     "'--headroom'", "between 1 and 4"),
    (["tune", "plan", "--rate", "200MB/s", "--tape-drive-rate", "fast"],
     "'--tape-drive-rate'", "not a byte rate"),
    (["tune", "plan", "--rate", "200MB/s", "--tape-target", "0"], "'--tape-target'",
     "not a byte rate"),
    (["tune", "plan", "--rate", "200MB/s", "--buffer", "-1TB"], "'--buffer'", "not a size"),
]


@pytest.mark.parametrize("argv, option, why", BAD_VALUES,
                         ids=[" ".join(a[:2]) + " " + o for a, o, _ in BAD_VALUES])
def test_a_bad_value_is_one_line_naming_the_option(gridxfer_home, tmp_path, capsys,
                                                   argv, option, why):
    argv = [str(tmp_path / "c.yaml") if a == "C" else str(tmp_path / "nagios.cmd")
            if a == "CMD" else str(tmp_path / "out") if a == "OUT" else a for a in argv]
    before = sorted(os.listdir(tmp_path))
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"Invalid value for {option}" in err and why in err, err
    assert not captured.out
    assert sorted(os.listdir(tmp_path)) == before        # nothing written, nothing made


@pytest.mark.parametrize("option, argv", [
    ("--alert-cmd-file", ["campaign", "run", "C", "--alert-cmd-file", "MISSING/nagios.cmd",
                          "--alert-floor", "20"]),
    ("--alert-cmd-file", ["campaign", "run", "C", "--dry-run", "--alert-cmd-file",
                          "MISSING/nagios.cmd", "--alert-floor", "20"]),
    ("--write-profile", ["tune", "advise", "--bandwidth", "10Gbit/s", "--rtt", "18ms",
                         "--write-profile", "MISSING/wan.conf"]),
    ("--write-profile", ["tune", "advise", "--bandwidth", "10Gbit/s", "--rtt", "18ms",
                         "--dry-run", "--write-profile", "MISSING/wan.conf"]),
    ("--png", ["campaign", "report", "nope", "--png", "MISSING/rate.png"]),
], ids=["alert-cmd-file", "alert-cmd-file dry-run", "write-profile", "write-profile dry-run",
        "png"])
def test_a_file_in_a_missing_directory_is_refused_before_any_work(gridxfer_home, tmp_path,
                                                                  capsys, option, argv):
    """--alert-cmd-file into a missing directory was a warning at the first alert, hours
    into the campaign; --write-profile printed the advice, then failed with exit 1."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "f.dat").write_bytes(b"x" * 10)
    spec = tmp_path / "c.yaml"
    spec.write_text(f"""campaign: opts
source: {{url: "file://{tmp_path}/src/", files: {{glob: "*"}}}}
destinations:
  - {{tier: A, pool: ["file://{tmp_path}/dst/"]}}
""")
    missing = tmp_path / "no" / "such"
    argv = [str(spec) if a == "C" else a.replace("MISSING", str(missing)) for a in argv]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert not captured.out
    assert captured.err.count("\n") == 1, captured.err
    assert f"Invalid value for '{option}'" in captured.err
    assert f"no such directory: {missing}" in captured.err
    assert not (tmp_path / "dst").exists()
    assert not (gridxfer_home / "campaigns" / "opts.sqlite").exists()


def test_the_files_a_command_writes_are_still_written(gridxfer_home, tmp_path, capsys,
                                                      monkeypatch):
    conf = tmp_path / "wan.conf"
    assert main(["tune", "advise", "--bandwidth", "10Gbit/s", "--rtt", "18ms",
                 "--write-profile", str(conf)]) == 0
    assert f"wrote {conf}" in capsys.readouterr().out and conf.stat().st_size > 0
    monkeypatch.chdir(tmp_path)         # a relative name: its directory is the cwd
    assert main(["tune", "advise", "--bandwidth", "1G", "--rtt", "20ms",
                 "--write-profile", "lan.conf"]) == 0
    assert (tmp_path / "lan.conf").is_file()


# metavars that promise a number, a quantity or a time: such an option parses in click
NUMERIC_METAVARS = {"N", "DURATION", "RATE", "SIZE", "FRACTION", "FILES", "WHEN", "SECONDS"}


def _options() -> list[tuple[str, click.Option]]:
    out: list[tuple[str, click.Option]] = []

    def walk(cmd: click.Command, path: str, ctx: click.Context) -> None:
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None
                walk(sub, f"{path} {name}", click.Context(sub, parent=ctx, info_name=name))
        out.extend((path, p) for p in cmd.params if isinstance(p, click.Option))
    walk(cli, "gridxfer", click.Context(cli, info_name="gridxfer"))
    return out


def test_no_option_takes_a_number_as_a_plain_string():
    """A numeric option typed as a plain string parses its value in the command's body,
    where the error cannot name it (the audit's -t abc, --alert-floor abc, --alert-window
    0s). Every option whose metavar or default says number is a click type instead."""
    options = _options()
    assert len(options) > 50
    plain = [f"{path} {'/'.join(p.opts)}" for path, p in options
             if p.type is click.STRING and not p.is_flag and not p.count
             and (p.metavar in NUMERIC_METAVARS
                  or (isinstance(p.default, str) and p.default[:1].isdigit()))]
    assert plain == []


def test_the_sweep_covers_every_numeric_option():
    """Each option typed by cli/params has a bad value in BAD_VALUES (or in
    test_tune_cli/test_testbed_token_cli): a new one is swept too."""
    from gridxfer.cli import params
    kinds = (params.Quantity, params.Whole, params.Number, params.Since, params.Pair)
    swept = {a for argv, _, _ in BAD_VALUES for a in argv if a.startswith("-")}
    swept |= {"--rtt", "--bandwidth", "--streams", "--rate", "--lifetime"}  # test_tune_cli,
    #                                                         test_testbed_token_cli
    missing = [f"{path} {'/'.join(p.opts)}" for path, p in _options()
               if isinstance(p.type, kinds) and not set(p.opts) & swept]
    assert missing == []


def test_help_still_shows_the_defaults_as_written(capsys):
    with pytest.raises(SystemExit):
        cli.main(["copy", "--help"], prog_name="gridxfer")
    out = capsys.readouterr().out
    assert "[default: 1h]" in out and "[default: 1]" in out
