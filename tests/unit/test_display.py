"""display.printable: the one helper every shown file name, URL and tool message passes."""
from __future__ import annotations

import pytest

from gridxfer.display import printable


@pytest.mark.parametrize("text,shown", [
    ("x\u202etxt.exe", "x\\u202etxt.exe"),            # RIGHT-TO-LEFT OVERRIDE
    ("a\u2066b\u2069c\u200e\u200f\u061c", "a\\u2066b\\u2069c\\u200e\\u200f\\u061c"),
    ("zero\u200bwidth\ufeff", "zero\\u200bwidth\\ufeff"),
    ("bad\nname\x1b[2J\x07", "bad\\nname\\x1b[2J\\x07"),
    ("c1\x85\x9b", "c1\\x85\\x9b"), ("a\u2028b\u2029", "a\\u2028b\\u2029"),
    ("not utf-8 \udcff", "not utf-8 \\udcff"),
])
def test_controls_bidi_and_invisible_characters_are_escaped(text, shown):
    assert printable(text) == shown
    assert printable(shown) == shown                    # escaping twice changes nothing
    assert shown.isprintable()


@pytest.mark.parametrize("text", ["ä1.txt", "データ.root", "a b", "\u00a0nbsp", "\U0001f600",
                                  "שלום.dat", "a\\b", "-rf", ""])
def test_letters_spaces_and_marks_are_shown_as_they_are(text):
    assert printable(text) == text
