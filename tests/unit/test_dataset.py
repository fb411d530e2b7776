"""Dataset expansion of file:// sources (listed directly, no mover needed)."""
from __future__ import annotations

import pytest

from gridxfer.campaign.dataset import expand, join_url
from gridxfer.campaign.spec import FileItem, SourceSpec
from gridxfer.errors import SpecError, UsageError


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "src"
    (root / "sub" / "deep").mkdir(parents=True)
    (root / "a.root").write_bytes(b"x" * 10)
    (root / "b.txt").write_bytes(b"y" * 3)
    (root / "sub" / "c.root").write_bytes(b"z" * 7)
    (root / "sub" / "deep" / "d.root").write_bytes(b"")
    (root / ".a.root.gxpart-0a1b2c3d").write_bytes(b"partial")
    return root


def test_glob_one_directory(tree):
    got = list(expand(SourceSpec(url=f"file://{tree}/", glob="*.root")))
    assert [(e.name, e.size) for e in got] == [("a.root", 10)]
    assert got[0].src_url == f"file://{tree}/a.root"


def test_recursive_with_glob(tree):
    got = list(expand(SourceSpec(url=f"file://{tree}/", glob="*.root", recursive=True)))
    assert [(e.name, e.size) for e in got] == [("a.root", 10), ("sub/c.root", 7),
                                               ("sub/deep/d.root", 0)]


def test_recursive_everything_skips_temp_names(tree):
    names = [e.name for e in expand(SourceSpec(url=f"file://{tree}/", recursive=True))]
    assert names == ["a.root", "b.txt", "sub/c.root", "sub/deep/d.root"]


def test_explicit_list_stats_missing_sizes(tree):
    src = SourceSpec(url=f"file://{tree}/", files=(FileItem("a.root"), FileItem("b.txt", 99, "0000abcd"),
                                                   FileItem("missing")))
    got = [(e.name, e.size, e.adler32) for e in expand(src)]
    assert got == [("a.root", 10, None), ("b.txt", 99, "0000abcd"), ("missing", 0, None)]


def test_list_file(tmp_path):
    lst = tmp_path / "l.txt"
    lst.write_text("# name size adler32\na 10\n\nsub/b 20 ABCD\n")
    got = list(expand(SourceSpec(url="root://h:1094//d/", list_file=str(lst))))
    assert [(e.name, e.src_url, e.size, e.adler32) for e in got] == [
        ("a", "root://h:1094//d/a", 10, None), ("sub/b", "root://h:1094//d/sub/b", 20, "0000abcd")]


def test_list_file_errors_name_the_line(tmp_path):
    lst = tmp_path / "l.txt"
    lst.write_text("a 10\nb ten\n")
    with pytest.raises(SpecError, match=r"l.txt:2: size: not a size"):
        list(expand(SourceSpec(url="root://h//d/", list_file=str(lst))))


def test_missing_directory(tmp_path):
    with pytest.raises(UsageError, match="not a directory"):
        list(expand(SourceSpec(url=f"file://{tmp_path}/nope/", glob="*")))


def test_join_url():
    assert join_url("root://h:1094//data/", "a/b") == "root://h:1094//data/a/b"
    assert join_url("gsiftp://h/data", "x") == "gsiftp://h/data/x"
