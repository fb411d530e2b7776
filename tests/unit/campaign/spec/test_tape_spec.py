"""Tape in campaign files: ``archive`` on a tier, ``bring_online`` on the source; bad
values name file:line and exit 2 (SpecError); the journal's spec round-trips them."""
from __future__ import annotations

import pytest

from gridxfer.campaign.spec.schema import load_spec, spec_from_dict, spec_to_dict
from gridxfer.errors import SpecError

TAPE = """\
campaign: to-tape
source:
  url: "root://t0.example:1094//store/raw/"
  files: {glob: "*.root"}
  bring_online: {timeout: 2h, pin_lifetime: 30m}
destinations:
  - tier: T1
    pool: ["root://t1.example//tape/"]
    archive: {timeout: 4h}
  - tier: T2
    pool: ["root://t2.example//disk/"]
"""


def _write(tmp_path, text):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


def test_archive_and_bring_online_are_read_and_round_trip(tmp_path):
    spec = load_spec(_write(tmp_path, TAPE))
    assert spec.tier("T1").archive_timeout == 4 * 3600
    assert spec.tier("T2").archive_timeout is None
    assert spec.source.bring_online.timeout == 7200
    assert spec.source.bring_online.pin_lifetime == 1800
    assert spec_from_dict(spec_to_dict(spec)) == spec


def test_pin_lifetime_has_a_default(tmp_path):
    spec = load_spec(_write(tmp_path, TAPE.replace(", pin_lifetime: 30m", "")))
    assert spec.source.bring_online.pin_lifetime == 3600


@pytest.mark.parametrize("old, new, line, text", [
    ("archive: {timeout: 4h}", "archive: {timeout: soon}", 9, "destinations[0].archive.timeout"),
    ("archive: {timeout: 4h}", "archive: {timout: 4h}", 9, "destinations[0].archive.timout"),
    ("archive: {timeout: 4h}", "archive: yes", 9, "expected {timeout: <duration>}"),
    ("archive: {timeout: 4h}", "archive: {timeout: 0s}", 9, "at least 1s"),
    ("archive: {timeout: 4h}", "archive: {timeout: 30d}", 9, "destinations[0].archive.timeout"),
    ("{timeout: 2h, pin_lifetime: 30m}", "{pin_lifetime: 30m}", 5, "timeout"),
    ("pin_lifetime: 30m", "pin_lifetime: -3m", 5, "source.bring_online.pin_lifetime"),
    ("bring_online: {timeout: 2h, pin_lifetime: 30m}", "bring_online: true", 5,
     "source.bring_online"),
])
def test_bad_tape_settings_name_file_line_and_field(tmp_path, old, new, line, text):
    path = _write(tmp_path, TAPE.replace(old, new))
    with pytest.raises(SpecError) as exc:
        load_spec(path)
    msg = str(exc.value)
    assert f"{path}:{line}" in msg and text in msg
    assert "\n" not in msg
