"""FTS3's names in a campaign file (issue 22): the same spec as gridxfer's own names, errors
when both are given, priority/activity/job_metadata read and kept, the README's map."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from gridxfer.campaign.spec.aliases import FTS3_KEYS
from gridxfer.campaign.spec.schema import load_spec, spec_from_dict, spec_to_dict
from gridxfer.errors import SpecError

HEAD = """\
campaign: c
source: {url: "root://t0.example:1094//raw/", files: [a.root, b.root]}
"""
OWN = HEAD + """\
destinations:
  - {tier: T1, pool: ["root://t1.example:1094//d/"], streams: 4}
  - {tier: T2, pool: ["root://t2.example:1094//d/"], streams: 4}
checksum: {verify: destination}
retries: {max: 5, backoff: 10s}
"""
FTS3 = HEAD + """\
destinations:
  - {tier: T1, pool: ["root://t1.example:1094//d/"]}
  - {tier: T2, pool: ["root://t2.example:1094//d/"], nostreams: 4}
verify_checksum: target
nostreams: 4
retry: 5
retry_delay: 10
"""


def load(tmp_path: Path, text: str):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return load_spec(p)


def test_fts3_names_give_the_same_spec(tmp_path):
    own, fts3 = load(tmp_path, OWN), load(tmp_path, FTS3)
    assert fts3 == own
    assert fts3.checksum.verify == "destination" and fts3.retries.max == 5
    assert fts3.retries.backoff == 10.0 and {t.streams for t in fts3.destinations} == {4}


@pytest.mark.parametrize("given, verify, algorithm", [
    ("verify_checksum: target", "destination", "adler32"),
    ("verify_checksum: source", "source", "adler32"),
    ("verify_checksum: both", "both", "adler32"),
    ("verify_checksum: none", "none", None),
    ("verify_checksum: true", "both", "adler32"),
    ("verify_checksum: false", "none", None),
    ("checksum: {verify: target}", "destination", "adler32"),
])
def test_verify_checksum(tmp_path, given, verify, algorithm):
    spec = load(tmp_path, HEAD + 'destinations: [{tier: T, pool: ["root://h//d/"]}]\n'
                + given + "\n")
    assert (spec.checksum.verify, spec.checksum.algorithm) == (verify, algorithm)


@pytest.mark.parametrize("extra, line, needle", [
    ("checksum: {verify: both}\nverify_checksum: target", 5,
     "verify_checksum: give checksum.verify or verify_checksum (FTS3's name), not both"),
    ("retries: {max: 2}\nretry: 3", 5, "retry: give retries.max or retry (FTS3's name)"),
    ("retries: {backoff: 2s}\nretry_delay: 3", 5, "retry_delay: give retries.backoff or"),
    ("verify_checksum: targte", 4, "verify_checksum: must be one of source, destination"),
    ("priority: 6", 4, "priority: must be 1 (lowest) to 5 (highest), as in FTS3, got 6"),
    ("priority: 0", 4, "priority: must be at least 1"),
    ("activity: 'a/b'", 4, "activity: bad activity 'a/b'"),
    ("activity_shares: {Express: 0}", 4, "activity_shares.Express: expected a weight above zero"),
    ("activity_shares: [a]", 4, "activity_shares: expected a mapping of activity: weight"),
    ("job_metadata: {url: 'root://h//f?authz=abcdefabcdef'}", 4,
     "job_metadata: carries a credential"),
    ("nostreams: 0", 4, "nostreams: must be at least 1"),
    ("checksum: none\nverify_checksum: target", 5,
     "verify_checksum: 'target' contradicts checksum: none"),
    ("retry: 100\nretry_delay: 1h", 4, "retries: backoff 3600s doubled 99 times waits"),
])
def test_fts3_name_errors(tmp_path, extra, line, needle):
    text = HEAD + 'destinations: [{tier: T, pool: ["root://h//d/"]}]\n' + extra + "\n"
    with pytest.raises(SpecError) as info:
        load(tmp_path, text)
    assert f"c.yaml:{line}: {needle}" in str(info.value), str(info.value)


def test_tier_streams_and_nostreams_both(tmp_path):
    text = HEAD + 'destinations: [{tier: T, pool: ["root://h//d/"], streams: 2, nostreams: 3}]\n'
    with pytest.raises(SpecError, match=r"c.yaml:3: destinations\[0\].nostreams: give streams"):
        load(tmp_path, text)


def test_priority_activity_metadata_kept(tmp_path):
    text = textwrap.dedent("""\
        campaign: c
        source:
          url: "root://t0.example:1094//raw/"
          files: [a, {name: b, priority: 5, activity: Express}, {name: c, priority: 1}]
        destinations:
          - {tier: T1, pool: ["root://t1//d/"], priority: 5}
          - {tier: T2, pool: ["root://t2//d/"]}
        priority: 2
        activity: Data Consolidation
        activity_shares: {Express: 3, Data Consolidation: 1}
        job_metadata: {request: 42, owner: ops, tags: [raw, "2026"]}
        """)
    spec = load(tmp_path, text)
    assert [f.priority for f in spec.source.files] == [None, 5, 1]
    assert [f.activity for f in spec.source.files] == [None, "Express", None]
    assert [t.priority for t in spec.destinations] == [5, 3]
    assert (spec.priority, spec.activity) == (2, "Data Consolidation")
    assert spec.activity_shares == (("Data Consolidation", 1.0), ("Express", 3.0))
    assert json.loads(spec.job_metadata) == {"request": 42, "owner": "ops",
                                             "tags": ["raw", "2026"]}
    assert spec_from_dict(json.loads(json.dumps(spec_to_dict(spec)))) == spec


def test_old_journal_spec_without_the_new_keys():
    spec = {"name": "c", "source": {"url": "root://h//s/"},
            "destinations": [{"name": "T", "pool": ["root://h//d/"]}],
            "checksum": {"algorithm": "adler32", "verify": "both"},
            "retries": {"max": 3, "backoff": 30.0}, "timeout": 60.0, "overwrite": False,
            "third_party": False}
    got = spec_from_dict(spec)
    assert (got.priority, got.activity, got.activity_shares, got.job_metadata) == (
        3, "default", (), None)


def test_readme_shows_every_fts3_name():
    readme = (Path(__file__).resolve().parents[4] / "README.md").read_text()
    assert "### FTS3 names in a campaign file" in readme
    section = readme.split("### FTS3 names in a campaign file", 1)[1].split("\n#", 1)[0]
    for alias in FTS3_KEYS:
        assert f"| `{alias.fts3}` |" in section, alias.fts3
