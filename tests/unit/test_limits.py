"""Every bound of gridxfer.limits, at the limit (accepted) and one unit above (exit 2,
one line naming the field, the value, the limit and why)."""
from __future__ import annotations

import argparse

import pytest

from gridxfer import limits
from gridxfer.campaign.spec.dataset import expand
from gridxfer.campaign.spec.schema import load_spec
from gridxfer.cli.main import main
from gridxfer.errors import SpecError

HEAD = 'campaign: c\nsource: {url: "root://h//d/", files: %s}\n'
TIER = "  - tier: %s\n    pool: [\"root://h//x/\"]\n"


def _spec(tier_extra: str = "", top: str = "", files: str = "[a]", tiers: str = "T1") -> str:
    out = HEAD % files + "destinations:\n"
    for i, name in enumerate(tiers.split()):
        out += TIER % name + (tier_extra.split("|")[i] if tier_extra else "")
    return out + top


# (case, text at the limit, text one above, line of the error, field, value shown, limit shown)
CASES = {
    "max_active": (_spec("    max_active: 1000\n"), _spec("    max_active: 1001\n"), 6,
                   "destinations[0].max_active", "1001", "1000"),
    "min_active": (_spec("    max_active: 1000\n    min_active: 1000\n"),
                   _spec("    max_active: 1000\n    min_active: 1001\n"), 7,
                   "destinations[0].min_active", "1001", "1000"),
    "max_active-total": (_spec("    max_active: 500\n|    max_active: 500\n", tiers="A B"),
                         _spec("    max_active: 500\n|    max_active: 501\n", tiers="A B"), 4,
                         "destinations", "the tiers' max_active add up to 1001, which", "1000"),
    "streams": (_spec("    streams: 64\n"), _spec("    streams: 65\n"), 6,
                "destinations[0].streams", "65", "64"),
    "tcp_buffer": (_spec("    tcp_buffer: 512MiB\n"), _spec(f"    tcp_buffer: {512 * 2**20 + 1}\n"),
                   6, "destinations[0].tcp_buffer", str(512 * 2**20 + 1), "512MiB"),
    "retries.max": (_spec(top="retries: {max: 100, backoff: 0s}\n"),
                    _spec(top="retries: {max: 101, backoff: 0s}\n"), 6, "retries.max", "101",
                    "100"),
    "retries.backoff": (_spec(top="retries: {max: 1, backoff: 7d}\n"),
                        _spec(top="retries: {max: 1, backoff: 604801s}\n"), 6,
                        "retries.backoff", "604801s", "7d"),
    "retries-last-wait": (_spec(top="retries: {max: 8, backoff: 4725s}\n"),
                          _spec(top="retries: {max: 8, backoff: 4726s}\n"), 6,
                          "retries", "backoff 4726s doubled 7 times waits 168h02m08s", "7d"),
    "timeout": (_spec(top="timeout: 7d\n"), _spec(top="timeout: 604801s\n"), 6, "timeout",
                "604801s", "7d"),
    "file-size": (_spec(files="[{name: a, size: 16TiB}]"),
                  _spec(files=f"[{{name: a, size: {16 * 2**40 + 1}}}]"), 2,
                  "source.files[0].size", str(16 * 2**40 + 1), "16TiB"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_campaign_bounds(tmp_path, case):
    ok, bad, line, field, value, limit = CASES[case]
    path = tmp_path / "c.yaml"
    path.write_text(ok)
    load_spec(path)
    path.write_text(bad)
    with pytest.raises(SpecError) as err:
        load_spec(path)
    want = f"{path}:{line}: {field}: {value} is above the limit {limit} ("
    assert str(err.value).startswith(want)


def test_list_file_size_bound(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(_spec(files="{from: list.txt}"))
    (tmp_path / "list.txt").write_text(f"a {16 * 2**40}\n")
    assert [e.size for e in expand(load_spec(path).source)] == [16 * 2**40]
    (tmp_path / "list.txt").write_text(f"a 1\nb {16 * 2**40 + 1}\n")
    with pytest.raises(SpecError, match=r"list.txt:2: size: '?17592186044417'? is above the lim"):
        list(expand(load_spec(path).source))


def test_campaign_cli_exits_2_with_one_line(tmp_path, gridxfer_home, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(_spec("    max_active: 20000\n"))
    assert main(["campaign", "run", "--dry-run", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1
    assert f"{path}:6: destinations[0].max_active: 20000 is above the limit 1000 (" in err


# (argv at the limit, argv one above, the refusal) -- the commands fail later for other
# reasons (no testbed, no campaign file), which shows the bound let the value through.
_ALERT = ["campaign", "run", "no-such-campaign.yaml", "--on-drop", "true", "--alert-floor", "1"]
CLI = {
    "netbench-duration": (["netbench", "tcp", "a", "b", "-t", "1d"],
                          ["netbench", "tcp", "a", "b", "-t", "86401s"],
                          "--duration: 86401s is above the limit 1d"),
    "netbench-omit": (["netbench", "tcp", "a", "b", "--omit", "60s"],
                      ["netbench", "tcp", "a", "b", "--omit", "61s"], "--omit: 61s is above"),
    "netbench-rate": (["netbench", "udp", "a", "b", "--rate", "10T"],
                      ["netbench", "udp", "a", "b", "--rate", "10000000000001"],
                      "--rate: 10000000000001 is above the limit 10Tbit/s"),
    "advise-bandwidth": (["tune", "advise", "--bandwidth", "10T", "--rtt", "1ms"],
                         ["tune", "advise", "--bandwidth", "10000000000001bit/s", "--rtt", "1ms"],
                         "--bandwidth: 10000000000001bit/s is above the limit 10Tbit/s"),
    "advise-rtt": (["tune", "advise", "--bandwidth", "1G", "--rtt", "60s"],
                   ["tune", "advise", "--bandwidth", "1G", "--rtt", "60.001s"],
                   "--rtt: 60.001s is above the limit 60s"),
    "advise-streams": (["tune", "advise", "--bandwidth", "1G", "--rtt", "1ms", "--streams", "64"],
                       ["tune", "advise", "--bandwidth", "1G", "--rtt", "1ms", "--streams", "65"],
                       "--streams: 65 is above the limit 64"),
    "plan-rate": (["tune", "plan", "--rate", "1250000000000B/s"],
                  ["tune", "plan", "--rate", "1250000000001B/s"],
                  "--rate: 1250000000001B/s is above the limit 1.25TB/s"),
    "plan-drive": (["tune", "plan", "--rate", "1MB/s", "--tape-drive-rate", "1250000000000B/s"],
                   ["tune", "plan", "--rate", "1MB/s", "--tape-drive-rate", "1250000000001B/s"],
                   "--tape-drive-rate: 1250000000001B/s is above"),
    # sizes are parsed through a float: one byte above 2**60 is 2**60; 1025PiB is the next step
    "plan-buffer": (["tune", "plan", "--rate", "1MB/s", "--buffer", "1024PiB"],
                    ["tune", "plan", "--rate", "1MB/s", "--buffer", "1025PiB"],
                    "--buffer: 1025PiB is above the limit 1024PiB"),
    "testbed-throttle": (["testbed", "up", "--dry-run", "--throttle",
                          "t1a-xrd1=1250000000000B/s"],
                         ["testbed", "up", "--dry-run", "--throttle",
                          "t1a-xrd1=1250000000001B/s"],
                         "--throttle: 1250000000001B/s is above the limit 1.25TB/s"),
    "testbed-size": (["testbed", "up", "--dry-run", "--size-limit", "t1a-xrd1=1024PiB"],
                     ["testbed", "up", "--dry-run", "--size-limit", "t1a-xrd1=1025PiB"],
                     "--size-limit: 1025PiB is above the limit 1024PiB"),
    "alert-window": ([*_ALERT, "--alert-window", "366d"], [*_ALERT, "--alert-window", "31622401s"],
                     "--alert-window: 31622401s is above the limit 366d"),
    "alert-floor": ([*_ALERT[:-1], "1250000000000B/s"], [*_ALERT[:-1], "1250000000001B/s"],
                    "--alert-floor: 1250000000001B/s is above"),
}


@pytest.mark.parametrize("case", sorted(CLI))
def test_cli_bounds(gridxfer_home, capsys, case):
    ok, bad, refusal = CLI[case]
    main(ok)
    assert "above the limit" not in "".join(capsys.readouterr())
    assert main(bad) == 2
    out, err = capsys.readouterr()
    option, _, why = refusal.partition(": ")      # click names the option (cli/params)
    assert err.startswith("gridxfer: error: gridxfer ") and f"Invalid value for '{option}'" in err
    assert f"': {why}" in err, err
    assert len(err.splitlines()) == 1


def test_check_duration_bounds():
    from gridxfer.monitoring.checks import link
    from gridxfer.monitoring.nagios import PluginUsage
    from gridxfer.monitoring.pluginargs import duration_arg
    assert duration_arg("366d") == 366 * 86400
    with pytest.raises(argparse.ArgumentTypeError, match=r"31622401s is above the limit 366d"):
        duration_arg("31622401s")
    parser = link.build_parser()
    link.build(parser.parse_args(["-H", "h", "-d", "1d", "-t", "0"]))
    with pytest.raises(PluginUsage, match=r"--duration: 86401s is above the limit 1d"):
        link.build(parser.parse_args(["-H", "h", "-d", "86401s", "-t", "0"]))


def test_every_limit_is_documented_in_the_readme():
    from pathlib import Path
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    for name, lim in limits.ALL.items():
        assert f"| {lim.shown} |" in readme, name
