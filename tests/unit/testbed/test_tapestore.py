"""testbed/tapestore.py + tapegpi.py: residency from the two names, the drives' queue, and
the prepare program's answers (no server: the files only)."""
from __future__ import annotations

import json
import os
import time

import pytest

from gridxfer.movers.tape import Residency
from gridxfer.testbed import tapegpi
from gridxfer.testbed.tapestore import ArchiveQueue, TapeLayout

BIG = 10**12


@pytest.fixture
def layout(tmp_path):
    lay = TapeLayout.of(tmp_path)
    lay.create()
    return lay


def write(layout, rel, data=b"abc", age=100.0):
    path = layout.data / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, (time.time() - age, time.time() - age))
    return path


def test_relative_keeps_to_the_export(layout):
    assert layout.relative("/data/a/b") == "a/b" == layout.relative("//data/a/b?x=1")
    for bad in ("/etc/passwd", "/data/", "/data/../etc", "/data/a/../../x", "/datax/f"):
        assert layout.relative(bad) is None, bad


def test_archive_then_purge_then_recall(layout):
    write(layout, "d/f1")
    q = ArchiveQueue(layout, min_age=1.0, purge_after_migration=True)
    assert layout.residency("d/f1") is Residency.DISK_ONLY
    job = q.claim("drive0", None, BIG)
    assert job is not None and job.kind == "archive" and job.key == "d/f1"
    assert q.claim("drive1", None, BIG) is None          # claimed once
    q.done(job)
    assert layout.residency("d/f1") is Residency.TAPE_ONLY
    assert q.claim("drive0", None, BIG) is None          # nothing staged yet
    layout.add_request("rid1", ["d/f1"])
    assert layout.requested() == {"d/f1"}
    job = q.claim("drive0", None, BIG)
    assert job is not None and job.kind == "retrieve"
    q.done(job)
    assert layout.residency("d/f1") is Residency.ON_TAPE
    assert (layout.data / "d/f1").read_bytes() == b"abc"
    assert q.claim("drive0", "retrieve", BIG) is None    # served: the request goes
    assert layout.requested() == set()


def test_young_temporary_and_rewritten_files(layout):
    write(layout, "young", age=0.0)
    write(layout, ".f.gxpart-1234")
    q = ArchiveQueue(layout, min_age=30.0)
    assert q.claim("d", None, BIG) is None
    old = write(layout, "old")
    job = q.claim("d", None, BIG)
    q.done(job)
    assert layout.residency("old") is Residency.ON_TAPE
    old.unlink()
    write(layout, "old", b"new version")                 # another inode: not on tape
    assert layout.residency("old") is Residency.DISK_ONLY
    assert layout.residency("nothing") is Residency.MISSING


def test_giveback_frees_the_file(layout):
    write(layout, "f")
    q = ArchiveQueue(layout)
    job = q.claim("d", "archive", BIG)
    q.giveback(job)
    assert q.claim("d", "archive", BIG) == job


def test_gpi_query_answers_the_eos_cta_json(layout, capsys):
    write(layout, "f")
    rc = tapegpi.main([str(layout.data.parent), "--", "rid7", "query", "/data/f", "/data/g"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["request_id"] == "rid7"
    assert out["responses"] == [{"path": "/data/f", "path_exists": True, "online": True},
                                {"path": "/data/g"}]


def test_gpi_stage_and_evict(layout):
    write(layout, "f")
    q = ArchiveQueue(layout)
    q.done(q.claim("d", None, BIG))
    assert tapegpi.main([str(layout.data.parent), "--", "*", "evict", "/data/f"]) == 0
    assert layout.residency("f") is Residency.TAPE_ONLY
    assert tapegpi.main([str(layout.data.parent), "-p", "0", "--", "r1", "stage",
                         "/data/f", "/etc/x"]) == 0
    assert layout.requested() == {"f"}


@pytest.mark.parametrize("argv", [[], ["dir"], ["dir", "--", "rid"], ["dir", "--", "r", "bogus"]])
def test_gpi_bad_arguments_exit_2(argv, tmp_path, capsys):
    argv = [str(tmp_path) if a == "dir" else a for a in argv]
    assert tapegpi.main(argv) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_a_file_finished_by_another_drive_between_scan_and_claim_is_not_taken_again(layout):
    """Drive B scanned f as DISK_ONLY, drive A wrote it meanwhile: B must not write it twice
    (seen as 14 MB written for 12 MB of files in test_tape_endpoint)."""
    write(layout, "f")
    q = ArchiveQueue(layout)
    q.done(q.claim("a", "archive", BIG))              # A: on tape, claim freed
    assert layout.residency("f") is Residency.ON_TAPE
    assert not q._take("f", Residency.DISK_ONLY)       # B's stale scan
    layout.evict("f")
    layout.add_request("r", ["f"])
    q.done(q.claim("a", "retrieve", BIG))
    assert not q._take("f", Residency.TAPE_ONLY)
