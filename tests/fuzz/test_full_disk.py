"""A full disk under $GRIDXFER_HOME: `campaign run` stops with exit 1 and one line, and the
journal stays resumable: after space is freed, `resume` finishes every file.

$GRIDXFER_HOME is a tiny tmpfs the test mounts (root), filled but for ~360 KB: planning 300
files fits (a ~110 KB journal), the run's journal writes do not (ENOSPC inside SQLite)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzzrun import judge_gx, run_gx  # noqa: E402

pytestmark = pytest.mark.root


@pytest.fixture
def tiny_home(tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("needs root (mounts a tmpfs)")
    home = tmp_path / "gxhome"
    home.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", str(home)],
                   check=True)
    try:
        monkeypatch.setenv("GRIDXFER_HOME", str(home))
        yield home
    finally:
        subprocess.run(["umount", "-l", str(home)], check=False)


def test_full_disk_exit_1_one_line_then_resume_finishes(tmp_path, tiny_home):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    for i in range(300):
        (src / f"f{i:03d}.dat").write_text(f"file {i}\n")
    spec = tmp_path / "full.yaml"
    spec.write_text(f'campaign: full\nsource: {{url: "file://{src}/", files: {{glob: "*.dat"}}}}\n'
                    f'destinations: [{{tier: T1, pool: ["file://{dst}/"], max_active: 4}}]\n'
                    'retries: {max: 0, backoff: 0s}\n')
    filler = tiny_home / "filler"
    st = os.statvfs(tiny_home)
    subprocess.run(["fallocate", "-l", str(st.f_bavail * st.f_frsize - 360 * 1024), str(filler)],
                   check=True)

    o = run_gx(["campaign", "run", "--quiet", str(spec)])
    journal = tiny_home / "campaigns" / "full.sqlite"
    assert judge_gx(o, {1}) is None, o
    assert f"{journal}: database or disk is full" in o.err and "campaign resume full" in o.err
    assert journal.exists()
    copied = len(list(dst.glob("*.dat"))) if dst.exists() else 0
    assert copied < 300                       # it did stop part-way

    filler.unlink()
    o = run_gx(["campaign", "resume", "--quiet", "full"])
    assert o.code == 0, o
    assert "300/300 files done, 0 failed" in o.out
    assert sorted(p.name for p in dst.glob("*.dat")) == [f"f{i:03d}.dat" for i in range(300)]


def test_tune_apply_on_a_full_disk_exit_1_one_line_and_writes_nothing(tmp_path, tiny_home,
                                                                       monkeypatch):
    """`tune apply` saves the originals under $GRIDXFER_HOME before it writes a key: on a
    full disk it stops there, with one line, and the namespace keeps its values."""
    from gridxfer.tuning.testing import scratch_netns
    monkeypatch.setenv("GRIDXFER_SYSCTL_DIR", str(tmp_path / "sysctl.d"))
    filler = tiny_home / "filler"
    st = os.statvfs(tiny_home)
    subprocess.run(["fallocate", "-l", str(st.f_bavail * st.f_frsize), str(filler)], check=True)
    keys = ["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_mtu_probing"]
    with scratch_netns() as ns:
        before = {k: ns.sysctl(k) for k in keys}
        o = run_gx(["tune", "apply", "dtn-10g", "--host", f"netns:{ns.name}", "--skip-global"])
        assert judge_gx(o, {1}) is None, o
        assert "No space left on device" in o.err
        assert {k: ns.sysctl(k) for k in keys} == before


def test_disk_full_while_planning_says_run_again(tmp_path, tiny_home):
    """Full before the plan is committed: no journal is kept, and the line says to run
    again (not to resume a journal that does not exist)."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(2000):
        (src / f"a-rather-long-file-name-to-fill-the-journal-{i:05d}.dat").write_text("x")
    spec = tmp_path / "plan.yaml"
    spec.write_text(f'campaign: plan\nsource: {{url: "file://{src}/", files: {{glob: "*.dat"}}}}\n'
                    f'destinations: [{{tier: T1, pool: ["file://{tmp_path}/dst/"]}}]\n')
    st = os.statvfs(tiny_home)
    subprocess.run(["fallocate", "-l", str(st.f_bavail * st.f_frsize - 64 * 1024),
                    str(tiny_home / "filler")], check=True)
    o = run_gx(["campaign", "run", "--quiet", str(spec)])
    assert judge_gx(o, {1}) is None, o
    assert "disk is full; free some space and run again" in o.err
    assert not (tiny_home / "campaigns" / "plan.sqlite").exists()
