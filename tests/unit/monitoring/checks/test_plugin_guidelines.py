"""The five check_gridxfer_* plugins against the Monitoring Plugins Development Guidelines
(https://www.monitoring-plugins.org/doc/guidelines.html), run as Nagios runs them (the
installed executables): hostile and bad arguments give exit 0-3 only, one line on stdout
and nothing on stderr; bad arguments are UNKNOWN (3, "Plugin Return Codes"); user text
never adds a line or a '|' ("Plugin Output for Nagios"); -v stays on one line ("Verbose
output")."""
from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "fixtures" / "monitoring"))
from monfixtures import make_journal, run_check, steady_attempts  # noqa: E402

MB = 1_000_000
PIPE = "\u00a6"


def one_line(r, code: int) -> str:
    """The plugin's only line, after checking what the guidelines allow around it."""
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert r.stderr == "", r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 1, r.stdout
    assert "Traceback" not in r.stdout and "removed illegal characters" not in r.stdout
    assert lines[0].count("|") <= 1
    return lines[0]


@pytest.fixture
def campaign(gridxfer_home):
    (gridxfer_home / "campaigns").mkdir()
    now = time.time()
    make_journal(gridxfer_home / "campaigns" / "c1.sqlite",
                 steady_attempts(now - 900, now, 200 * MB, "root://se1.example//d/")
                 + steady_attempts(now - 900, now, 50 * MB, "root://se2.example//d/"))
    return "c1"


def test_an_endpoint_filter_that_matches_no_endpoint_is_unknown(campaign):
    """Was OK at 0 MB/s: a typo in -E looked like an idle link. Nothing to judge: UNKNOWN,
    naming the endpoints there are; the same for -T and for the buffer's inflow filter."""
    line = one_line(run_check("throughput", "-C", campaign, "-E", "nomatch", "-w", "1:"), 3)
    assert line == ("THROUGHPUT UNKNOWN - endpoint filter 'nomatch' matches no endpoint of "
                    "c1.sqlite (endpoints: se1, se2)")
    line = one_line(run_check("throughput", "-C", campaign, "-T", "T9"), 3)
    assert line == "THROUGHPUT UNKNOWN - tier 'T9' is no tier of c1.sqlite (tiers: T1)"
    line = one_line(run_check("buffer", "--used", "1", "--capacity", "10", "--outflow", "0",
                              "--inflow-campaign", campaign, "--inflow-endpoint", "se9"), 3)
    assert "endpoint filter 'se9' matches no endpoint" in line
    # a filter that matches (by name, URL or glob) is judged as before
    for ep in ("se2", "root://se2.example//d/", "se2*"):
        line = one_line(run_check("throughput", "-C", campaign, "-E", ep, "-c", "100:"), 2)
        assert line.startswith("THROUGHPUT CRITICAL - throughput 4") and f"-> {ep}," in line
    # one that matches an endpoint with nothing in the window is an idle window, not UNKNOWN
    r = run_check("throughput", "-C", campaign, "-E", "se1", "--at", str(time.time() + 7200),
                  "--idle", "warning")
    assert one_line(r, 1).startswith("THROUGHPUT WARNING - no transfers in the last 10m00s")


@pytest.mark.parametrize("text", ["[|s]e1", "[\ns]e1", "[\x1bs]e1"])
def test_user_text_cannot_add_a_line_or_start_the_perfdata(campaign, text):
    """-E 'a|b' made nagiosplugin drop the '|' and print a second line saying so; a newline
    split the status line. The glob still matches se1 (fnmatch classes)."""
    line = one_line(run_check("throughput", "-C", campaign, "-E", text, "--per-endpoint"), 0)
    status, perf = line.split(" | ")
    assert "-> [" in status and "e1, " in status
    assert PIPE in status if "|" in text else "?" in status or "[ s]e1" in status
    assert re.fullmatch(r"(\S+=[-\d.;:@~]+ ?)+", perf), perf


def test_perfdata_labels_from_the_data_have_no_quote_equals_or_pipe(tmp_path, gridxfer_home):
    """guidelines, "Performance data": a label may not hold '=' or "'"; a drive named in a
    log is data, not trusted text."""
    log = tmp_path / "s.jsonl"
    log.write_text(json.dumps({"end": time.time() - 60, "bytes": 5e9, "duration": 20,
                               "drive": "d|1'x=y\nz"}) + "\n")
    line = one_line(run_check("tape", "--jsonl", str(log), "--no-state", "--per-drive",
                              "--min-volume", "0"), 0)
    assert "drive_d_1_x_y_z_MBps=250.0;;;0" in line.split(" | ")[1]


def test_a_bad_range_is_one_unknown_line_naming_the_option_and_the_form(campaign):
    for name, extra in (("throughput", ["-C", campaign]), ("tape", ["--cta", "/x"]),
                        ("buffer", ["--used", "1", "--capacity", "2", "--outflow", "0",
                                    "--inflow", "0"]), ("tuning", ["-P", "dtn-10g"]),
                        ("link", ["-H", "127.0.0.1"])):
        line = one_line(run_check(name, *extra, "-w", "abc"), 3)
        assert line == (f"{name.upper()} UNKNOWN - argument -w/--warning: 'abc' is not a range "
                        "([@]start:end, e.g. 10, 200:, ~:10, @10:20) (see --help)")
    line = one_line(run_check("tape", "--cta", "/x", "--drives-warning", "4:2"), 3)
    assert line.endswith("'4:2' is not a range: start 4 must not be greater than end 2 "
                         "(see --help)")


@pytest.mark.parametrize("name,args,expected", [
    ("throughput", ["-C", "c1", "-W", "-5m"], "-W/--window: not a duration: '-5m'"),
    ("throughput", ["-J", ""], "-J/--journal: empty path"),
    ("throughput", ["-C", "c1", "--at", "nan"], "--at: not a time"),
    ("throughput", ["-C", "c1", "--prom-file", ""], "--prom-file: empty path"),
    ("buffer", ["-p", "", "--outflow", "0", "--inflow", "0"], "-p/--path: empty path"),
    ("buffer", ["--used", "5", "--capacity", "1", "--outflow", "0", "--inflow", "0"],
     "--used 5 B is more than --capacity 1 B"),
    ("tape", ["--cta", "x.log", "--mount-types", ""], "--mount-types: expected 'all' or"),
    ("tape", ["--cta", "x.log", "--mount-types", "a|b"], f"got 'a{PIPE}b'"),
    ("tape", ["--cta", "", "--no-state"], "--cta: empty path"),
    ("tape", ["--cta", "x.log", "--state-file", "/nonexistent-gx/s.json"],
     "--state-file: '/nonexistent-gx/s.json': no directory '/nonexistent-gx'"),
    ("throughput", ["-C", "c1", "--state-file", "/tmp"], "--state-file: '/tmp': is a directory"),
    ("throughput", ["-C", "c1", "--baseline-min-samples", "99999999"],
     "--baseline-min-samples must be 1-10000"),
    ("tape", ["--cta", "x.log", "--min-volume", "-1GB"], "not a size: '-1GB'"),
    ("tuning", ["-P", "dtn-10g", "-i", ""], "-i/--iface: '' is not an interface name"),
    ("tuning", ["-P", "dtn-10g", "-i", "../x"], "'../x' is not an interface name"),
    ("link", ["-H", "a|b"], f"-H 'a{PIPE}b': expected a host name or an address"),
    ("link", ["-H", "u:pw@h"], "-H 'u:***@h': expected a host name"),
    ("link", ["-H", "127.0.0.1", "--iperf3", "iperf3"],
     "--iperf3 'iperf3': expected the full path of an executable file"),
    ("link", ["-H", "127.0.0.1", "--iperf3", "/etc/passwd"], "expected the full path of an"),
])
def test_bad_arguments_are_one_unknown_line(campaign, name, args, expected):
    """Each of these was accepted and misreported (an empty path is the current directory,
    --used above --capacity read 500% full, an empty --mount-types counted every session as
    a read: 0 MB/s), or refused with a misleading line ('expected one argument' for -5m,
    'not found' for a file that is not executable)."""
    line = one_line(run_check(name, *args), 3)
    assert line.startswith(f"{name.upper()} UNKNOWN - ") and expected in line, line


def test_a_buffer_filling_a_hair_faster_than_it_drains_has_no_exponent(gridxfer_home):
    """1e-300 B/s of net inflow gave a 300-digit 'full in' and 'time_to_full_s=2.5e+300'
    (perfdata values are [-0-9.] only)."""
    line = one_line(run_check("buffer", "--used", "1", "--capacity", "10", "--outflow", "0",
                              "--inflow", "1e-300"), 0)
    assert "full in more than 10 years" in line
    assert "time_to_full_s=315360000.0;14400:;3600:;0" in line


def test_verbose_one_is_still_a_single_line(campaign):
    """guidelines, "Verbose output": -v is a single line with more information; lines come
    from -vv on (nagiosplugin's -v printed the perfdata on a line of its own)."""
    line = one_line(run_check("throughput", "-C", campaign, "-v"), 0)
    assert " | " in line and "throughput_MBps=" in line
    r = run_check("throughput", "-C", campaign, "-vv")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 2


def test_link_unreachable_server_is_critical_not_unknown():
    """guidelines, "Plugin Return Codes": name resolution errors and refused connections
    are not UNKNOWN (that is for bad arguments and the plugin's own failures). Real iperf3
    against a closed port: CRITICAL, no perfdata."""
    line = one_line(run_check("link", "-H", "127.0.0.1", "-p", "9", "-d", "1s"), 2)
    assert line.startswith("LINK CRITICAL - iperf3 to 127.0.0.1:9: unable to connect")
    assert "|" not in line
