"""`gridxfer campaign ...` in-process: exit codes, one-line errors, JSON keys.

Transfers here use a tiny local test mover (the CLI's logic is under test); real
movers on real servers are in tests/integration/test_campaign_*.py."""
from __future__ import annotations

import json
import os
import shutil
import signal
import zlib
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from gridxfer.campaign.engine import scheduler
from gridxfer.cli.main import main
from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import Entry, TransferOutcome


def _malformed_cases() -> dict:
    """The malformed campaign files of tests/unit/campaign/spec/test_spec.py (one list for
    both suites)."""
    import importlib.util
    path = Path(__file__).resolve().parents[1] / "unit" / "campaign" / "spec" / "test_spec.py"
    spec = importlib.util.spec_from_file_location("_gridxfer_spec_cases", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.MALFORMED


MALFORMED = _malformed_cases()


def _path(url):
    return urlsplit(url).path


class LocalMover:
    """file:// -> file:// copy with adler32, for CLI logic tests only."""

    kill_after: int | None = None
    calls = 0

    def copy(self, src, dst, *, params, progress=None):
        type(self).calls += 1
        if self.kill_after is not None and type(self).calls > self.kill_after:
            if type(self).calls == self.kill_after + 1:     # one Ctrl-C (two would hurry)
                os.kill(os.getpid(), signal.SIGINT)
            raise TransferError(ErrorClass.CANCELLED, "interrupted")
        if not os.path.exists(_path(src)):
            raise TransferError(ErrorClass.SOURCE_MISSING, f"{src}: no such file")
        os.makedirs(os.path.dirname(_path(dst)), exist_ok=True)
        shutil.copyfile(_path(src), _path(dst))
        data = Path(_path(dst)).read_bytes()
        if progress:
            progress(len(data), len(data))
        return TransferOutcome(len(data), 0.01, f"{zlib.adler32(data):08x}", 1, "local")

    def stat(self, url):
        return Entry(url, os.path.getsize(_path(url)))

    def unlink(self, url):
        os.unlink(_path(url))


@pytest.fixture
def local(monkeypatch, gridxfer_home, tmp_path):
    LocalMover.calls, LocalMover.kill_after = 0, None
    monkeypatch.setattr(scheduler, "default_mover_factory", lambda s, d, t: LocalMover())
    src = tmp_path / "src"
    src.mkdir()
    for i in range(6):
        (src / f"f{i}.dat").write_bytes(os.urandom(1000 + i))
    (tmp_path / "dst").mkdir()
    return tmp_path


def campaign(tmp_path, files='{glob: "*.dat"}', name="c1", extra=""):
    text = f"""campaign: {name}
source: {{url: "file://{tmp_path}/src/", files: {files}}}
destinations:
  - tier: T1
    pool: ["file://{tmp_path}/dst/a/", "file://{tmp_path}/dst/b/"]
    max_active: 2
retries: {{max: 1, backoff: 0.01s}}
{extra}"""
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_exits_2_with_one_line(tmp_path, gridxfer_home, capsys, case):
    text, line, needle = MALFORMED[case]
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert main(["campaign", "run", "--quiet", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"gridxfer: error: {path}:{line}: " if line else
                          f"gridxfer: error: {path}: "), err


def test_run_status_report_list(local, capsys):
    spec = campaign(local)
    assert main(["campaign", "run", "--quiet", "--json", str(spec)]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["schema"] == 1 and res["kind"] == "run"      # the shape: tests/contract
    assert (res["state"], res["files"]["done"], res["files"]["failed"]) == ("done", 6, 0)
    copied = sorted(p.name for p in (local / "dst").rglob("*.dat"))
    assert copied == [f"f{i}.dat" for i in range(6)]

    assert main(["campaign", "status", "c1", "--json", "--links"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["files"]["done"] == st["files"]["total"] == 6 and st["state"] == "done"
    assert st["status"]["links"] and st["status"]["links"][0]["tier"] == "T1"

    png = local / "t.png"
    assert main(["campaign", "report", "c1", "--json", "--png", str(png)]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert {"links", "endpoints", "histogram", "share", "png"} <= set(rep["report"])
    assert rep["report"]["links"][0]["files"]["done"] == 6
    assert sum(b["count"] for b in rep["report"]["histogram"]) == 6
    assert png.stat().st_size > 10_000

    assert main(["campaign", "report", "c1"]) == 0
    text = capsys.readouterr().out
    assert "per link" in text and "distribution" in text and "share" in text

    assert main(["campaign", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)      # the status documents of `status --json`
    assert [(c["campaign"], c["kind"], c["schema"], c["error"]) for c in listed] == \
        [("c1", "status", 1, None)]
    assert listed[0]["files"]["done"] == 6

    # a second run of the same campaign is refused (resume it instead)
    assert main(["campaign", "run", "--quiet", str(spec)]) == 2
    assert "resume" in capsys.readouterr().err


def test_dry_run_transfers_nothing(local, capsys):
    assert main(["campaign", "run", "--dry-run", str(campaign(local))]) == 0
    assert "would transfer" in capsys.readouterr().out
    assert not list((local / "dst").rglob("*.dat"))
    assert not (Path(os.environ["GRIDXFER_HOME"]) / "campaigns" / "c1.sqlite").exists()


def test_partial_failure_exit_3(local, capsys):
    spec = campaign(local, files='["f0.dat", {name: gone.dat, size: 5}, "f1.dat"]')
    assert main(["campaign", "run", "--quiet", str(spec)]) == 3
    out, err = capsys.readouterr()
    assert "FAILED T1 gone.dat: source_missing" in out
    assert "1 of 3 files failed" in err
    (local / "src" / "gone.dat").write_bytes(b"back again")
    assert main(["campaign", "resume", "c1", "--quiet"]) == 3        # failed stays failed
    capsys.readouterr()
    assert main(["campaign", "resume", "c1", "--quiet", "--retry-failed"]) == 0
    assert (local / "dst").joinpath("a", "gone.dat").exists() or \
        (local / "dst").joinpath("b", "gone.dat").exists()


def test_interrupt_exit_4_then_resume(local, capsys):
    LocalMover.kill_after = 2
    spec = campaign(local)
    assert main(["campaign", "run", "--quiet", str(spec)]) == 4
    assert "gridxfer campaign resume c1" in capsys.readouterr().err
    assert main(["campaign", "status", "c1", "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["state"] == "interrupted" and st["files"].get("active", 0) == 0
    LocalMover.kill_after = None
    assert main(["campaign", "resume", "c1", "--quiet"]) == 0
    assert len(list((local / "dst").rglob("*.dat"))) == 6


def test_unknown_campaign_and_selector(gridxfer_home, local, capsys):
    assert main(["campaign", "status", "nope"]) == 2
    assert "no such campaign journal" in capsys.readouterr().err
    assert main(["campaign", "run", "--selector", "fastest", str(campaign(local))]) == 2
    assert "unknown selector" in capsys.readouterr().err


def test_alert_options_need_threshold(local, capsys):
    spec = campaign(local)
    assert main(["campaign", "run", "--quiet", "--on-drop", "true", str(spec)]) == 2
    assert "threshold" in capsys.readouterr().err


def test_alerter_is_fed(local, capsys, monkeypatch):
    seen = []
    import gridxfer.monitoring.alerts as alerts

    class Spy(alerts.DropAlerter):
        def observe(self, now, rate_bytes_per_s):
            seen.append(rate_bytes_per_s)
            super().observe(now, rate_bytes_per_s)

    monkeypatch.setattr(alerts, "DropAlerter", Spy)
    cmd = local / "nagios.cmd"
    spec = campaign(local)
    assert main(["campaign", "run", "--quiet", "--alert-cmd-file", str(cmd),
                 "--alert-floor", "5", "--alert-window", "30s", str(spec)]) == 0
    assert seen, "the alerter got no rate samples"


def test_passive_alerts_name_the_alert_host_and_end_with_ok(local, capsys):
    """--alert-host names the Nagios host (it was always this machine's name), and the end
    of the campaign sends a final OK (the passive service stayed CRITICAL)."""
    cmd = local / "nagios.cmd"
    spec = campaign(local)
    assert main(["campaign", "run", "--quiet", "--alert-cmd-file", str(cmd), "--alert-host",
                 "se-x.example", "--alert-floor", "1000000", "--alert-window", "1ms",
                 str(spec)]) == 0
    lines = cmd.read_text().splitlines()
    assert lines and all(";se-x.example;gridxfer_throughput;" in ln for ln in lines)
    last = lines[-1].split(";")
    assert last[3] == "0" and "campaign ended: done, 6/6 files done, 0 failed" in last[4]
    assert main(["campaign", "run", "--quiet", "--alert-host", "h", str(spec)]) == 2
    assert "--alert-host need --alert-cmd-file" in capsys.readouterr().err


def test_no_matching_files_leaves_no_journal(local, capsys):
    spec = campaign(local, files='{glob: "*.nothing"}')
    assert main(["campaign", "run", "--quiet", str(spec)]) == 2
    assert "matched no files" in capsys.readouterr().err
    assert not list((Path(os.environ["GRIDXFER_HOME"]) / "campaigns").glob("c1.sqlite*"))


@pytest.mark.parametrize("files", ['{glob: "*.nothing"}', '{glob: "*.dat"}'])
def test_run_refuses_a_staged_source_it_cannot_ask_before_listing_as_dry_run_does(
        local, capsys, files):
    """The same one line from `run` and `--dry-run`, whether the glob matches or not (the
    fuzz suite found `run` saying "matched no files" where `--dry-run` named the tape)."""
    spec = campaign(local, files=files, extra="")
    text = spec.read_text().replace('files: ' + files + '}',
                                    'files: ' + files + ', bring_online: {timeout: 1h}}')
    spec.write_text(text)
    said = []
    for argv in (["--dry-run", "--no-probe"], []):
        assert main(["campaign", "run", "--quiet", *argv, str(spec)]) == 2
        said.append(capsys.readouterr().err)
    assert said[0] == said[1] and "cannot report whether a file is on tape" in said[0], said
    assert not list((Path(os.environ["GRIDXFER_HOME"]) / "campaigns").glob("c1.sqlite*"))


@pytest.mark.parametrize("dry", [False, True])
def test_every_error_of_a_campaign_file_one_line_each(tmp_path, gridxfer_home, capsys, dry):
    """Issue 22: one run reports every error, each `file:line: field: message`, exit 2."""
    import importlib.util
    path = Path(__file__).resolve().parents[1] / "unit" / "campaign" / "spec" / "test_spec.py"
    spec = importlib.util.spec_from_file_location("_gridxfer_spec_cases2", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    bad = tmp_path / "bad.yaml"
    bad.write_text(mod.SEVEN_ERRORS)
    assert main(["campaign", "run", "--quiet", *(["--dry-run"] if dry else []), str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 8, err
    assert [ln.split(": ")[2] for ln in lines] == [
        f"{bad}:{n}" for n in (1, 5, 6, 7, 8, 8, 9, 10)]
    assert all(ln.startswith("gridxfer: error: ") for ln in lines)
