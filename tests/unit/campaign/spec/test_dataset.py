"""Dataset expansion of file:// sources (listed directly, no mover needed)."""
from __future__ import annotations

import pytest

from gridxfer.campaign.spec.dataset import expand, join_url
from gridxfer.campaign.spec.schema import FileItem, SourceSpec
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
    src = SourceSpec(url=f"file://{tree}/",
                     files=(FileItem("a.root"), FileItem("b.txt", 99, "0000abcd"),
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


def test_join_url_quotes_for_the_protocol():
    assert join_url("gsiftp://h/data", "a b?c") == "gsiftp://h/data/a%20b%3Fc"
    assert join_url("root://h//data/", "a%2fb") == "root://h//data/a%2fb"
    assert join_url("file:///data/", "%2f%2e%2e%2fsecret") == "file:///data/%2f%2e%2e%2fsecret"


def test_hostile_local_names_are_carried_or_fail_alone(tmp_path):
    """Regression (issue 17): names were joined raw and local sources were decoded:
    file:///src/%2f%2e%2e%2fsecret read /secret. Now a legal name stays itself, and a
    name the rule refuses becomes a bad entry instead of breaking the listing."""
    root = tmp_path / "src"
    root.mkdir()
    legal = ["a?b", "a#b", "a%2fb", "%2f%2e%2e%2fsecret", "a b", "ü.root", "x%3fy", "-rf"]
    for n in legal + ["bad\nname"]:
        (root / n).write_bytes(n.encode())
    got = {e.name: e for e in expand(SourceSpec(url=f"file://{root}", glob="*"))}
    assert set(got) == set(legal) | {"bad\nname"}
    for n in legal:
        assert got[n].bad is None and got[n].size == len(n.encode())
        assert got[n].src_url == f"file://{root}/{n}"
    assert "control character" in got["bad\nname"].bad


def test_list_names_the_protocol_cannot_carry_fail_alone(tmp_path):
    src = SourceSpec(url="root://h//d/",
                     files=(FileItem("ok", 1), FileItem("data.root?oss.asize=5", 1),
                                                FileItem("a\x00b", 1)))
    got = [(e.name, e.bad is None) for e in expand(src)]
    assert got == [("ok", True), ("data.root?oss.asize=5", False), ("a\x00b", False)]


def test_listing_names_are_decoded_per_protocol(monkeypatch):
    """A GridFTP listing entry 'a%2fb' (gfal2 gives raw names; the mover quotes them) is
    the file 'a%2fb', never 'a/b'; a component that decodes to one with '/' is bad, and a
    bad directory is one bad entry, never listed through a URL naming another place."""
    from gridxfer.campaign.spec import dataset
    from gridxfer.movers.base import Entry
    from gridxfer.movers.names import join_url as strict_join

    base = "gsiftp://h/d/"
    tree = {base: [Entry(strict_join(base, "a%2fb"), 3), Entry(base + "x%2fy", 4),
                   Entry(strict_join(base, "a b"), 5), Entry(base + "%2e%2e", 6, is_dir=True),
                   Entry(base + "bad%0Adir", 0, is_dir=True),
                   Entry(strict_join(base, "sub"), 0, is_dir=True)],
            "gsiftp://h/d/sub/": [Entry("gsiftp://h/d/sub/%3F", 7)]}
    listed = []

    class Fake:
        def listdir(self, url):
            listed.append(url)
            return tree[url]

    monkeypatch.setattr(dataset, "_mover", lambda url: Fake())
    got = {e.name: e for e in expand(SourceSpec(url=base, recursive=True))}
    assert got["a%2fb"].bad is None and got["a%2fb"].src_url == "gsiftp://h/d/a%252fb"
    assert "'/' inside" in got["x/y"].bad
    assert got["a b"].bad is None and got["sub/?"].src_url == "gsiftp://h/d/sub/%3F"
    assert got["bad\ndir"].bad and listed == [base, "gsiftp://h/d/sub/"]
    assert ".." not in " ".join(got)


def test_a_link_that_cannot_be_followed_is_planned_not_the_end_of_the_plan(tmp_path):
    """A dangling link (or a loop) in a listed directory ended the whole plan with
    'No such file or directory', exit 1. It is listed with size 0: its transfer fails it
    alone (source_missing), as a missing file of an explicit list; a target outside the
    source directory is a refused name."""
    (tmp_path / "a.dat").write_bytes(b"x" * 3)
    (tmp_path / "gone.dat").symlink_to(tmp_path / "never.dat")
    (tmp_path / "loop.dat").symlink_to("loop.dat")
    (tmp_path / "out.dat").symlink_to("/nonexistent-gx/x")
    got = {e.name: (e.size, e.bad) for e in expand(SourceSpec(url=f"file://{tmp_path}/",
                                                               glob="*.dat"))}
    assert got["a.dat"] == (3, None)
    assert got["gone.dat"] == (0, None) and got["loop.dat"][0] == 0
    assert "resolves outside" in (got["out.dat"][1] or "")
