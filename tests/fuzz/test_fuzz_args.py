"""Fuzz: command-line arguments of every `gridxfer` subcommand and every check_gridxfer_*
entry point (seeded, in-process), plus a handful through the real executables.

Only what is safe to run for real on this host is fuzzed: `testbed up` and `tune apply`
always with --dry-run, `testbed down` only with --dry-run, netbench against host names that
no testbed has. A value that happens to be valid may run (exit 0, or 1 where the command
documents it); anything else exits 2 (gridxfer) or 3 (UNKNOWN, checks) with one line.
"""
from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzzgen import NUMBERS  # noqa: E402
from fuzzrun import Tally, judge_check, judge_gx, run_check, run_gx  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
WEIRD = NUMBERS + ["", " ", "-", "x" * 5000, "\udcff", "a\nb", "\u2603", "../../etc/passwd",
                   "/nonexistent/dir/x", "%s%n", "${HOME}", "$(id)", "-1s", "1..2", "~", "@",
                   "10:", "~:5", "@10:20", "5:1", "nan:", ":inf"]

ALWAYS = ["\u00b2", ".inf", "nan", "9" * 400, "1e400", "a\nb", "\udcff"]   # in every slot


def _gx_cases(tmp: Path, rnd: random.Random) -> list[tuple[list[str], set[int]]]:
    spec = tmp / "c.yaml"
    (tmp / "src").mkdir(exist_ok=True)
    (tmp / "src" / "a.dat").write_bytes(b"a")
    spec.write_text(f'campaign: c\nsource: {{url: "file://{tmp}/src/", files: {{glob: "*.dat"}}}}\n'
                    f'destinations: [{{tier: T1, pool: ["file://{tmp}/dst/"]}}]\n')
    err2 = {2}
    # (argv with one "{}" slot, allowed exit codes when the slot holds a weird value)
    templates = [
        (["campaign", "status", "{}"], err2),
        (["campaign", "report", "{}"], err2),
        (["campaign", "report", "--json", "nope", "--png", "{}"], err2),
        (["campaign", "resume", "--quiet", "{}"], err2),
        (["campaign", "resume", "--quiet", "--selector", "{}", "nope"], err2),
        (
            ["campaign", "resume", "--quiet", "nope", "--on-drop", "true", "--alert-floor", "{}"],
            err2,
        ),
        (
            [
                "campaign",
                "resume",
                "--quiet",
                "nope",
                "--on-drop",
                "true",
                "--alert-baseline",
                "{}",
            ],
            err2,
        ),
        (
            [
                "campaign",
                "resume",
                "--quiet",
                "nope",
                "--on-drop",
                "true",
                "--alert-floor",
                "1",
                "--alert-window",
                "{}",
            ],
            err2,
        ),
        (["campaign", "run", "--dry-run", "--quiet", "--selector", "{}", str(spec)], {0, 2}),
        (["campaign", "run", "--dry-run", "--quiet", "{}"], err2),
        (
            [
                "campaign",
                "run",
                "--quiet",
                str(tmp / "missing.yaml"),
                "--alert-cmd-file",
                "x",
                "--alert-floor",
                "{}",
            ],
            err2,
        ),
        (["campaign", "{}"], err2),
        (["campaign", "verify", "{}"], err2),
        (["campaign", "verify", "--checkers", "{}", "nope"], err2),
        (["campaign", "cancel", "{}"], err2),
        (["campaign", "status", "--since", "{}", "nope"], err2),
        (["campaign", "status", "--tier", "{}", "nope"], err2),
        (["campaign", "report", "--since", "{}", "nope"], err2),
        (["campaign", "report", "--endpoint", "{}", "nope"], err2),
        (["campaign", "run", "--dry-run", "--quiet", "--engine", "{}", str(spec)], err2),
        (["campaign", "run", "--dry-run", "--quiet", "--fts3", "{}", str(spec)], err2),
        (["copy", "{}", str(tmp / "copied")], {1, 2}),
        # below tmp however weird ("../../x" included): copy makes missing directories
        (["copy", str(tmp / "src" / "a.dat"), str(tmp / "out" / "a" / "b") + "/{}"],
         {0, 1, 2}),
        (["copy", "-t", "{}", str(tmp / "src" / "a.dat"), str(tmp / "copied")], {0, 2}),
        (["copy", "--checksum-mode", "{}", str(tmp / "src" / "a.dat"), str(tmp / "c2")], {0, 2}),
        (["{}"], err2),
        (["campaign", "list", "{}"], err2),
        (["testbed", "{}"], err2),
        (["testbed", "status", "{}"], err2),
        (["tune", "{}"], err2),
        (["tune", "list", "{}"], err2),
        (["tune", "rollback", "{}"], err2),
        (["netbench", "{}"], err2),
        (["netbench", "matrix", "-P", "{}"], {1, 2}),
        (["testbed", "up", "--dry-run", "--throttle", "{}"], err2),
        (["testbed", "up", "--dry-run", "--throttle", "t1a-xrd2={}"], {0, 2}),
        (["testbed", "up", "--dry-run", "--size-limit", "t1b-xrd={}"], {0, 2}),
        (["testbed", "up", "--dry-run", "{}"], err2),
        (["testbed", "exec", "{}", "--", "true"], {1, 2}),
        (["testbed", "env", "{}"], err2),
        (["testbed", "down", "--dry-run", "{}"], err2),
        (["tune", "show", "{}"], err2),
        (["tune", "show", "--json", "{}"], err2),
        (["tune", "diff", "{}"], err2),
        (["tune", "diff", "dtn-10g", "--host", "{}"], {0, 1, 2}),
        (["tune", "apply", "--dry-run", "{}"], err2),
        (["tune", "apply", "--dry-run", "dtn-10g", "--host", "{}"], {0, 1, 2}),
        (["tune", "verify", "dtn-10g", "--iface", "{}"], {0, 1, 2}),
        (["tune", "rollback", "--dry-run", "--host", "{}"], {0, 1, 2}),
        (["tune", "advise", "--bandwidth", "{}", "--rtt", "18ms"], {0, 2}),
        (["tune", "advise", "--bandwidth", "1G", "--rtt", "{}"], {0, 2}),
        (["tune", "advise", "--bandwidth", "1G", "--rtt", "18ms", "--streams", "{}"], {0, 2}),
        (["tune", "advise", "--bandwidth", "1G", "--rtt", "18ms", "--headroom", "{}"], {0, 2}),
        (
            [
                "tune",
                "advise",
                "--bandwidth",
                "1G",
                "--rtt",
                "18ms",
                "--dry-run",
                "--write-profile",
                "{}",
            ],
            {0, 2},
        ),
        (["tune", "plan", "--rate", "{}"], {0, 2}),
        (["tune", "plan", "--rate", "200MB/s", "--tape-drive-rate", "{}"], {0, 2}),
        (["tune", "plan", "--rate", "200MB/s", "--tape-target", "{}"], {0, 2}),
        (["tune", "plan", "--rate", "200MB/s", "--buffer", "{}"], {0, 2}),
        (["netbench", "tcp", "gx-no-a", "gx-no-b", "-t", "{}"], {1, 2}),
        (["netbench", "tcp", "gx-no-a", "gx-no-b", "--omit", "{}"], {1, 2}),
        (["netbench", "tcp", "gx-no-a", "gx-no-b", "--bin-width", "{}"], {1, 2}),
        (["netbench", "tcp", "gx-no-a", "gx-no-b", "-P", "{}"], {1, 2}),
        (["netbench", "udp", "gx-no-a", "gx-no-b", "-b", "{}"], {1, 2}),
        (["netbench", "udp", "gx-no-a", "gx-no-b", "-b", "1M", "-l", "{}"], {1, 2}),
        (["netbench", "rtt", "gx-no-a", "{}", "-c", "2"], {1, 2}),
        (["netbench", "matrix", "-t", "{}", "gx-no-a", "gx-no-b"], {1, 2}),
        (
            [
                "netbench",
                "compare",
                "gx-no-a",
                "gx-no-b",
                "--before",
                "{}",
                "--after",
                "dtn-10g",
                "--dry-run",
            ],
            {1, 2},
        ),
        (
            [
                "netbench",
                "compare",
                "gx-no-a",
                "gx-no-b",
                "--before",
                "dtn-10g",
                "--after",
                "dtn-40g",
                "--png",
                "{}",
                "-t",
                "1s",
            ],
            {1, 2},
        ),
    ]
    cases = []
    for argv, allowed in templates:
        for value in ALWAYS + rnd.sample(WEIRD, 5):
            cases.append(([a.replace("{}", value) for a in argv], allowed))
    for argv, allowed in templates:           # and each with an unknown option / no value
        cases.append(([a for a in argv if a != "{}"] + ["--no-such-option"], allowed | {2}))
    return cases


def test_gridxfer_arguments(tmp_path, home, monkeypatch):
    monkeypatch.chdir(tmp_path)         # relative weird values land here, not in the clone
    tally = Tally()
    for argv, allowed in _gx_cases(tmp_path, random.Random(41)):
        o = run_gx(argv)
        tally.add(" ".join(a[:30] for a in argv), o, judge_gx(o, allowed))
    print(tally.report("gridxfer arguments"))
    assert tally.cases >= 300 and not tally.problems, tally.report("gridxfer arguments")
    assert not (tmp_path / "nonexistent").exists()


CHECKS = {
    "throughput": [["-J", "{}"], ["-C", "{}"], ["-W", "{}"], ["-w", "{}"], ["-c", "{}"],
                   ["-t", "{}"], ["--baseline-alpha", "{}"], ["--baseline-min-samples", "{}"],
                   ["--baseline-warning", "{}"], ["--state-file", "{}"], ["--at", "{}"],
                   ["--idle", "{}"], ["--prom-file", "{}"], ["-C", "x", "-E", "{}"],
                   ["-C", "x", "-T", "{}"], ["-C", "{}", "--per-endpoint"],
                   ["-C", "x", "--baseline", "{}"]],
    "tape": [["--cta", "{}"], ["--dcache", "{}"], ["--jsonl", "{}"], ["--min-volume", "{}"],
             ["-W", "{}"], ["--drives-warning", "{}"], ["--mount-types", "{}"],
             ["--rate-basis", "{}"], ["--state-file", "{}"], ["--cta", "/dev/null",
             "--log-tz", "{}"], ["--cta", "/dev/null", "--drives-critical", "{}"]],
    "buffer": [["-p", "{}", "--inflow", "1MB/s"], ["--capacity", "{}", "--used", "1GB",
               "--inflow", "1MB/s"], ["--capacity", "10GB", "--used", "{}", "--inflow", "1MB/s"],
               ["-p", ".", "--inflow", "{}"], ["-p", ".", "--outflow", "{}", "--inflow", "1MB/s"],
               ["-p", ".", "--ttf-warning", "{}", "--inflow", "1MB/s"],
               ["-p", ".", "--inflow-journal", "{}"], ["-p", ".", "-W", "{}", "--inflow", "1"],
               ["-p", ".", "--inflow", "1MB/s", "--outflow-campaign", "{}"],
               ["-p", ".", "--inflow-campaign", "{}", "--inflow-endpoint", "x"],
               ["-p", ".", "--inflow-campaign", "x", "--tier", "{}"],
               ["-p", ".", "--inflow", "1MB/s", "--outflow-basis", "{}"]],
    "tuning": [["-P", "{}"], ["-P", "dtn-10g", "-H", "{}"], ["-P", "dtn-10g", "-i", "{}"],
               ["-P", "dtn-10g", "--known-hosts", "{}", "-H", "ssh:gx-no-such-host.invalid"]],
    "link": [["-H", "127.0.0.1", "-p", "{}", "--iperf3", "/nonexistent/iperf3"],
             ["-H", "{}", "--iperf3", "/nonexistent/iperf3"],
             ["-H", "127.0.0.1", "-d", "{}", "--iperf3", "/nonexistent/iperf3"],
             ["-H", "127.0.0.1", "-P", "{}", "--iperf3", "/nonexistent/iperf3"],
             ["-H", "127.0.0.1", "--retransmits-warning", "{}", "--iperf3", "/nonexistent/x"]],
}


def test_check_arguments(tmp_path, home):
    import importlib
    rnd = random.Random(43)
    tally = Tally()
    for name, templates in CHECKS.items():
        module = importlib.import_module(f"gridxfer.monitoring.checks.{name}")
        for argv in templates:
            for value in ALWAYS + rnd.sample(WEIRD, 3):
                args = [a.replace("{}", value) for a in argv]
                o = run_check(module, args)
                tally.add(f"{name} {' '.join(a[:30] for a in args)}", o,
                          judge_check(o, {0, 1, 2, 3}))
            o = run_check(module, [a for a in argv if a != "{}"] + ["--no-such-option"])
            tally.add(f"{name} {argv[0]} --no-such-option", o, judge_check(o, {3}))
    print(tally.report("check arguments"))
    assert tally.cases >= 150 and not tally.problems, tally.report("check arguments")


def test_prom_file_never_creates_directories(tmp_path, home):
    from gridxfer.monitoring import prometheus
    from gridxfer.monitoring.checks import buffer
    target = tmp_path / "no" / "such" / "dir" / "out.prom"
    o = run_check(buffer, ["--capacity", "10GB", "--used", "1GB", "--inflow", "1MB/s",
                           "--outflow", "2MB/s", "--prom-file", str(target)])
    assert judge_check(o, {3}) is None, o
    assert "prom-file" in o.out and not (tmp_path / "no").exists()
    assert prometheus.main(["--prom-file", str(target)]) == 1
    assert not (tmp_path / "no").exists()


def _exe(name: str) -> str:
    return str(Path(sys.executable).parent / name)


@pytest.mark.parametrize("argv,code", [
    (["gridxfer", "campaign", "run", "--dry-run", "DEEP"], 2),
    (["gridxfer", "campaign", "status", "\u00b2" * 3], 2),
    (["gridxfer", "tune", "advise", "--bandwidth", "9" * 400, "--rtt", "18ms"], 2),
    (["gridxfer", "testbed", "up", "--dry-run", "--throttle", "t1a-xrd2=.inf"], 2),
    (["check_gridxfer_throughput", "-w", "nan:", "-J", "/nonexistent"], 3),
    (["check_gridxfer_buffer", "--capacity", "1e400", "--used", "1", "--inflow", "1"], 3),
])
def test_real_entry_points(tmp_path, home, argv, code):
    """A handful through the installed executables: what a shell and Nagios see."""
    deep = tmp_path / "deep.yaml"
    deep.write_text("campaign: " + "[" * 3000 + "]" * 3000 + "\n")
    argv = [str(deep) if a == "DEEP" else a for a in argv]
    exe = _exe(argv[0])
    if not os.path.exists(exe):
        pytest.skip(f"{argv[0]} is not installed in this environment")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    res = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=60, env=env)
    assert res.returncode == code, (res.stdout, res.stderr)
    assert "Traceback" not in res.stdout + res.stderr
    lines = (res.stderr if argv[0] == "gridxfer" else res.stdout).splitlines()
    assert len(lines) == 1, (res.stdout, res.stderr)
