"""Fuzzed inputs across all checks: always exit 0-3, exactly one line, never a traceback.

Runs the real installed entry points as subprocesses, 4 at a time.
"""
from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures" / "monitoring"))
from monfixtures import cta_text, dcache_store, make_journal, run_check  # noqa: E402

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "monitoring"


def build_cases(tmp: Path, home: Path) -> list[tuple[str, list[str]]]:
    rnd = random.Random(6)
    now = time.time()
    (home / "campaigns").mkdir(parents=True)
    make_journal(home / "campaigns" / "good.sqlite", [(now - 100, now - 50, 10**9, "se")])
    files: dict[str, Path] = {}

    def f(name: str, data: bytes | str) -> str:
        p = tmp / name
        p.write_bytes(data if isinstance(data, bytes) else data.encode())
        files[name] = p
        return str(p)

    good_line = cta_text(now - 60, "D1", "V1", 5 * 10**9, 20.0)
    garbage = {
        "random.bin": bytes(rnd.getrandbits(8) for _ in range(4096)),
        "empty.log": b"",
        "nul.log": b"\0" * 1000 + b"\n",
        "longline.log": b"MSG=\"Tape session finished\" " + b"x" * 200_000 + b"\n",
        "quotes.log": b'MSG="Tape session finished" ' + b'a="b\\' * 3000 + b"\n",
        "badnum.log": good_line.replace('dataVolume="5000000000"', 'dataVolume="lots"') + "\n",
        "nan.log": good_line.replace('totalTime="', 'totalTime="nan').replace(
            'payloadTransferSpeedMBps="20.00"', 'payloadTransferSpeedMBps="nan"') + "\n",
        "inf.log": good_line.replace('payloadTransferSpeedMBps="20.00"',
                                     'payloadTransferSpeedMBps="1e-320"') + "\n",
        "neg.log": good_line.replace('dataVolume="5000000000"', 'dataVolume="-5"') + "\n",
        "zero.log": good_line.replace('payloadTransferSpeedMBps="20.00"',
                                      'payloadTransferSpeedMBps="0"').replace(
            'totalTime="', 'totalTime="-') + "\n",
        "badjson.json": '{"message": "Tape session finished", "epoch_time": [1]\n{"a":\n',
        "jsonlist.json": '["Tape session finished"]\n',
        "jsonstr.json": '{"message": "Tape session finished", "mountType": "ArchiveForUser", '
                        '"epoch_time": 1e308, "dataVolume": 1e308, "totalTime": 1e308}\n',
        "utf.log": "MSG=\"Tape session finished\" tapeDrive=\"\u2603\ud7ff\" \udcff".encode(
            "utf-8", "surrogateescape") + b"\xff\xfe\n",
        "dcache-bad": dcache_store(now, "p", 10, 10).replace("store]", "store] [") + "\n"
                      + "99.99 99:99:99 [pool:p:store] [AB,1] [/x] a@b 1 1 {0:\"\"}\n",
        "dcache-neg": dcache_store(now, "p", 10**9, -5) + "\n",
        "jsonl-bad": '{"end": "x", "bytes": 1}\n{"end": 1, "bytes": 10, "rate_MBps": 0}\n'
                     '{"end": 1e400, "bytes": -1, "duration": 5}\nnull\n',
        "journal-garbage.sqlite": b"SQLite format 3\0" + bytes(rnd.getrandbits(8)
                                                              for _ in range(2000)),
        "journal-empty.sqlite": b"",
        "state-garbage.json": "{{{{",
        "state-list.json": "[1, 2, 3]",
        "state-badbucket.json": '{"version": 1, "ewma": {"value": "x", "n": 1}}',
    }
    for name, data in garbage.items():
        f(name, data)
    bad_journal = tmp / "journal-weird.sqlite"
    conn = sqlite3.connect(bad_journal)
    conn.execute("CREATE TABLE attempts (started, ended, bytes, endpoint, tier, status)")
    conn.execute("INSERT INTO attempts VALUES ('x', 'y', 'z', NULL, NULL, NULL)")
    conn.execute("INSERT INTO attempts VALUES (1, 2, 'lots', 'se', 'T1', 'ok')")
    conn.commit()
    conn.close()
    notable = tmp / "journal-notable.sqlite"
    sqlite3.connect(notable).close()
    fifo = tmp / "fifo.log"
    os.mkfifo(fifo)
    statedir = tmp / "statedir"
    statedir.mkdir()
    cases: list[tuple[str, list[str]]] = []
    tape_logs = [k for k in garbage if not k.startswith(("journal", "state", "dcache", "jsonl"))]
    for name in tape_logs:
        cases.append(("tape", ["--cta", str(files[name]), "-w", "60:", "-c", "40:"]))
    for name in ("dcache-bad", "dcache-neg", "random.bin", "utf.log"):
        cases.append(("tape", ["--dcache", str(files[name])]))
    for name in ("jsonl-bad", "random.bin", "badjson.json"):
        cases.append(("tape", ["--jsonl", str(files[name]), "--no-state"]))
    cases += [
        ("tape", ["--cta", str(tmp / "missing.log")]),
        ("tape", ["--cta", str(tmp)]),                                   # a directory
        ("tape", ["--cta", str(fifo), "-t", "1"]),                        # would block: refused
        ("tape", ["--cta", str(FIX / "cta-taped-4x18.log"), "--state-file", str(statedir)]),
        ("tape", ["--cta", str(FIX / "cta-taped-4x18.log"), "--state-file",
                  str(files["state-garbage.json"])]),
        ("tape", ["--cta", str(FIX / "cta-taped-4x18.log"), "--state-file",
                  str(tmp / "no" / "such" / "dir" / "state")]),
        ("tape", ["--cta", str(FIX / "cta-taped-4x18.log"), "-W", "0"]),
        ("tape", ["--cta", str(FIX / "cta-taped-4x18.log"), "-W", "-5m"]),
        ("tape", ["--cta", str(FIX / "cta-taped-4x18.log"), "--min-volume", "lots"]),
        ("tape", ["--cta", str(FIX / "cta-taped-4x18.log"), "--rate-basis", "magic"]),
        ("tape", []),
        ("throughput", ["-w", "abc"]),
        ("throughput", ["-c", "10:5"]),
        ("throughput", ["-w", "nan"]),
        ("throughput", ["-w", "1e5"]),
        ("throughput", ["-w", "~"]),
        ("throughput", ["-w", "@:"]),
        ("throughput", ["-t", "-1"]),
        ("throughput", ["-t", "soon"]),
        ("throughput", ["--no-such-option"]),
        ("throughput", ["-C", "../etc/passwd"]),
        ("throughput", ["-C", "missing"]),
        ("throughput", ["-C", "good", "-J", str(files["journal-empty.sqlite"])]),
        ("throughput", ["-J", str(files["journal-garbage.sqlite"])]),
        ("throughput", ["-J", str(files["journal-empty.sqlite"])]),
        ("throughput", ["-J", str(bad_journal)]),
        ("throughput", ["-J", str(notable)]),
        ("throughput", ["-J", str(tmp)]),
        ("throughput", ["-C", "good", "--at", "0"]),                      # empty window
        ("throughput", ["-C", "good", "--at", "nope"]),
        ("throughput", ["-C", "good", "--state-file", str(files["state-garbage.json"])]),
        ("throughput", ["-C", "good", "--state-file", str(files["state-list.json"])]),
        ("throughput", ["-C", "good", "--state-file", str(files["state-badbucket.json"])]),
        ("throughput", ["-C", "good", "--state-file", str(statedir)]),
        ("throughput", ["-C", "good", "--baseline-alpha", "7"]),
        ("throughput", ["-C", "good", "--baseline-min-samples", "0"]),
        ("buffer", []),
        ("buffer", ["-p", str(tmp / "missing"), "--inflow", "1", "--outflow", "1"]),
        ("buffer", ["-p", str(tmp), "--capacity", "0", "--inflow", "1", "--outflow", "1"]),
        ("buffer", ["--used", "5GB", "--inflow", "1", "--outflow", "1"]),
        ("buffer", ["--used", "50GB", "--capacity", "10GB", "--inflow", "1", "--outflow", "1"]),
        ("buffer", ["-p", str(tmp), "--inflow", "nan", "--outflow", "1"]),
        ("buffer", ["-p", str(tmp), "--inflow", "-5MB/s", "--outflow", "1"]),
        ("buffer", ["-p", str(tmp), "--inflow-campaign", "missing", "--outflow", "1"]),
        ("buffer", ["-p", str(tmp), "--inflow", "1", "--cta", str(files["random.bin"])]),
        ("buffer", ["-p", str(tmp), "--inflow", "1", "--outflow", "1",
                    "--ttf-warning", "1m", "--ttf-critical", "1h"]),
        ("link", []),
        ("link", ["-H", "127.0.0.1", "-p", "0"]),
        ("link", ["-H", "127.0.0.1", "-p", "1", "-d", "1", "-t", "6"]),   # closed port
        ("link", ["-H", "127.0.0.1", "-P", "0"]),
        ("link", ["-H", "127.0.0.1", "--iperf3", "/nonexistent/iperf3", "-d", "1"]),
        ("tuning", []),
        ("tuning", ["-P", "no-such-profile"]),
        ("tuning", ["-P", str(files["random.bin"])]),
        ("tuning", ["-P", "dtn-10g", "-H", "netns:no-such-ns-gx"]),
        ("tuning", ["-P", "dtn-10g", "-H", "bogus:x"]),
        ("tuning", ["-P", "dtn-10g", "-w", "x:y"]),
    ]
    return cases


def test_fuzzed_inputs_always_give_one_nagios_line(tmp_path, gridxfer_home):
    cases = build_cases(tmp_path, gridxfer_home)
    assert len(cases) >= 50

    def run(case: tuple[str, list[str]]):
        name, args = case
        return case, run_check(name, *args, timeout=30)

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(run, cases))
    bad = []
    for (name, args), r in results:
        out, err = r.stdout, r.stderr
        ok = (r.returncode in (0, 1, 2, 3) and out.endswith("\n") and out.count("\n") == 1
              and out.startswith(f"{name.upper()} ") and "Traceback" not in out + err
              and (r.returncode != 3 or " UNKNOWN" in out.split("|")[0]))
        if not ok:
            bad.append((name, args, r.returncode, out, err[-500:]))
    assert not bad, "\n".join(map(repr, bad))
    # a FIFO as log is refused at once instead of blocking until the timeout
    fifo_case = [r for (n, a), r in results if "fifo.log" in " ".join(a)][0]
    assert fifo_case.returncode == 3 and "not a regular file" in fifo_case.stdout


SLOW_PLUGIN = """
import time, nagiosplugin
from gridxfer.monitoring.nagios import GxCheck, GxResource, PluginParser, run_plugin

class Slow(GxResource):
    def collect(self):
        time.sleep(60)
        yield nagiosplugin.Metric("x", 1)

run_plugin("slow", PluginParser(prog="check_slow", description="sleeps"),
           lambda args: GxCheck(Slow(), name="slow"), ["-t", "1"])
"""


def test_timeout_is_one_unknown_line():
    """-t aborts a probe that hangs with one UNKNOWN line, exit 3, well before the hang ends."""
    start = time.monotonic()
    res = subprocess.run([sys.executable, "-c", SLOW_PLUGIN], capture_output=True, text=True,
                         timeout=30)
    assert res.returncode == 3, res
    assert res.stdout.count("\n") == 1 and "UNKNOWN" in res.stdout and "Timeout" in res.stdout
    assert "Traceback" not in res.stdout + res.stderr
    assert time.monotonic() - start < 20


def test_help_and_version_exit_unknown():
    for name in ("throughput", "tape", "buffer", "tuning", "link"):
        r = run_check(name, "--help")
        assert r.returncode == 3 and "usage: check_gridxfer_" in r.stdout
        assert "Exit codes: 0 OK" in r.stdout
        r = run_check(name, "-V")
        assert r.returncode == 3 and r.stdout.startswith(f"check_gridxfer_{name} (gridxfer) ")
