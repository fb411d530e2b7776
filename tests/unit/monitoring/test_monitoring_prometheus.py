"""node_exporter textfile output."""
from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fixtures" / "monitoring"))
from monfixtures import make_journal  # noqa: E402

from gridxfer.monitoring.prometheus import (Sample, campaign_samples, main, render,  # noqa: E402
                                            write_textfile)


def test_render_groups_and_escapes():
    text = render([Sample("b_metric", 1.5, {"x": 'a"b\\c\nd'}, "help me"),
                   Sample("a_metric", 3), Sample("b_metric", float("inf"), {"x": "y"})])
    assert text == ('# TYPE a_metric gauge\na_metric 3\n# HELP b_metric help me\n'
                    '# TYPE b_metric gauge\nb_metric{x="a\\"b\\\\c\\nd"} 1.5\n'
                    'b_metric{x="y"} +Inf\n')


def test_atomic_world_readable(tmp_path):
    out = tmp_path / "gx.prom"
    write_textfile(out, [Sample("m", 1)])
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o644
    assert out.read_text() == "# TYPE m gauge\nm 1\n"
    assert [p.name for p in tmp_path.iterdir()] == ["gx.prom"]   # no temp file left


def test_campaign_samples_and_module_entry(gridxfer_home, tmp_path):
    jdir = gridxfer_home / "campaigns"
    jdir.mkdir()
    make_journal(jdir / "camp.sqlite", [(90, 100, 1000, "se1"), (95, 100, 500, "se2")])
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for s in campaign_samples([jdir / "camp.sqlite"], 10, now=100)}
    assert samples[("gridxfer_campaign_throughput_bytes_per_second",
                    (("campaign", "camp"),))] == 150.0
    assert samples[("gridxfer_campaign_files", (("campaign", "camp"), ("state", "done")))] == 2
    out = tmp_path / "c.prom"
    assert main(["--prom-file", str(out), "--campaign", "camp", "--window", "1m"]) == 0
    assert 'gridxfer_campaign_bytes{campaign="camp",state="done"} 1500' in out.read_text()
    assert main(["--prom-file", str(out), "--campaign", "nope"]) == 1
