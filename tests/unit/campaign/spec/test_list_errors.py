"""A list file (`files: {from: list.txt}`) reports every bad line in one run (issue 22)."""
from __future__ import annotations

import pytest

from gridxfer.campaign.spec import dataset
from gridxfer.campaign.spec.model import SourceSpec
from gridxfer.errors import SpecError, SpecErrors


def _expand(tmp_path, text: str) -> list:
    path = tmp_path / "list.txt"
    path.write_text(text)
    return list(dataset.expand(SourceSpec("root://h//s/", list_file=str(path))))


def test_every_bad_line_at_once(tmp_path):
    with pytest.raises(SpecErrors) as info:
        _expand(tmp_path, "a.root 10\n/abs 10\nb.root ten\n# note\nc.root 10 xyz\nd.root 4\n")
    path = tmp_path / "list.txt"
    assert info.value.lines() == [
        f"{path}:2: name: '/abs' must be relative",
        f"{path}:3: size: not a size in bytes: 'ten'",
        f"{path}:5: adler32: not an adler32: 'xyz'"]


def test_one_bad_line_is_one_error(tmp_path):
    with pytest.raises(SpecError) as info:
        _expand(tmp_path, "a.root 10\nb.root\n")
    assert not isinstance(info.value, SpecErrors)
    assert str(info.value).endswith("list.txt:2: expected 'name size [adler32]'")


def test_errors_are_bounded(tmp_path):
    with pytest.raises(SpecErrors) as info:
        _expand(tmp_path, "x\n" * (dataset.MAX_LIST_ERRORS + 50))
    assert len(info.value.errors) == dataset.MAX_LIST_ERRORS


def test_good_list(tmp_path):
    got = _expand(tmp_path, "a.root 10\nsub/b.root 20 1a2b\n")
    assert [(e.name, e.size, e.adler32) for e in got] == [("a.root", 10, None),
                                                         ("sub/b.root", 20, "00001a2b")]
