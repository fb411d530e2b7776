"""A file name with a bidi control (U+202E shows 'x\u202etxt.exe' as 'xexe.txt'), an
invisible or a control character is shown escaped by every view that prints names: the
dry-run plan, run's, status's and report's failure lines (display.printable); the copy
itself keeps the name's own characters."""
from __future__ import annotations

import os

from gridxfer.cli.main import main

BIDI = "x\u202etxt.exe"
ZW = "zero\u200bwidth.dat"
HIDDEN = ("\u202e", "\u200b")


def _shown(text: str) -> None:
    assert not any(ch in text for ch in HIDDEN), ascii(text)


def test_bidi_and_invisible_names_are_escaped_where_shown_and_copied_as_they_are(
        gridxfer_home, tmp_path, capsys):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    for n in (BIDI, ZW, "plain.dat"):
        (src / n).write_bytes(b"data of " + n.encode())
    (dst / ZW).write_bytes(b"already there")            # fails: exists, overwrite off
    spec = tmp_path / "c.yaml"
    spec.write_text(f'campaign: bidi\nsource: {{url: "file://{src}/", files: {{glob: "*"}}}}\n'
                    f'destinations:\n  - {{tier: A, pool: ["file://{dst}/"]}}\n')
    assert main(["campaign", "run", "--dry-run", str(spec)]) == 3     # the existing one
    out, err = capsys.readouterr()
    _shown(out + err)
    assert f"file://{src}/x\\u202etxt.exe -> file://{dst}/x\\u202etxt.exe" in out, out
    assert f"EXISTS file://{dst}/zero\\u200bwidth.dat" in out

    assert main(["campaign", "run", "--quiet", str(spec)]) == 3
    out, err = capsys.readouterr()
    _shown(out + err)
    assert "FAILED A zero\\u200bwidth.dat: exists: " in out and \
        f"file://{dst}/zero\\u200bwidth.dat" in out, out
    assert (dst / BIDI).read_bytes() == b"data of " + BIDI.encode()   # its own name
    assert sorted(os.listdir(dst)) == sorted([BIDI, ZW, "plain.dat"])

    for argv in (["campaign", "status", "--failed", "bidi"], ["campaign", "report", "bidi"]):
        assert main(argv) == 0
        out, err = capsys.readouterr()
        _shown(out + err)
        assert "zero\\u200bwidth.dat" in out, (argv, out)
