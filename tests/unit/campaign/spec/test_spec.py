"""Campaign file validation: every error names file:line and the field."""
from __future__ import annotations

import textwrap

import pytest

from gridxfer.campaign.spec.schema import load_spec, spec_from_dict, spec_to_dict
from gridxfer.errors import SpecError

GOOD = """\
campaign: sc-t0-t1
source: {url: "root://t0.example:1094//store/raw/", files: {glob: "*.root"}}
destinations:
  - tier: T1-CNAF
    pool: ["gsiftp://se01.cnaf.example/data/", "gsiftp://se02.cnaf.example/data"]
    streams: 4
    max_active: 6
    tcp_buffer: 4MiB
checksum: {algorithm: adler32, verify: both}
retries: {max: 3, backoff: 30s}
timeout: 10m
"""

# name -> (yaml text, expected line, text that must be in the message)
MALFORMED = {
    "unknown-top-key": (
        GOOD + "overwirte: true\n",
        12,
        "overwirte: unknown key (did you mean 'overwrite'?)",
    ),
    "unknown-tier-key": (
        GOOD.replace("    streams: 4", "    stream: 4"),
        6,
        "destinations[0].stream: unknown key (did you mean 'streams'",
    ),
    "bad-scheme": (
        GOOD.replace("gsiftp://se01", "gsftp://se01"),
        5,
        "destinations[0].pool[0]: unsupported URL scheme 'gsftp'",
    ),
    "url-no-host": (
        GOOD.replace("root://t0.example:1094//store/raw/", "root:///store/raw/"),
        2,
        "source.url: URL 'root:///store/raw/' has no host",
    ),
    "bad-port": (GOOD.replace("t0.example:1094", "t0.example:99999"), 2, "source.url: URL"),
    "bad-ipv6-host": (GOOD.replace("t0.example:1094", "[::1"), 2,
                      "source.url: URL 'root://[::1//store/raw/' has a bad host"),
    "bad-ip-in-brackets": (GOOD.replace("t0.example:1094", "[zz]"), 2,
                           "source.url: URL 'root://[zz]//store/raw/' has a bad host"),
    "bad-size": (GOOD.replace("4MiB", "4 apples"), 8, "destinations[0].tcp_buffer: not a size"),
    "bad-duration": (
        GOOD.replace("backoff: 30s", "backoff: 30 parsecs"),
        10,
        "retries.backoff: not a duration",
    ),
    "zero-timeout": (
        GOOD.replace("timeout: 10m", "timeout: 0"),
        11,
        "timeout: must be greater than zero",
    ),
    "empty-pool": (
        GOOD.replace(
            'pool: ["gsiftp://se01.cnaf.example/data/", "gsiftp://se02.cnaf.example/data"]',
            "pool: []",
        ),
        5,
        "destinations[0].pool: the pool is empty",
    ),
    "streams-string": (
        GOOD.replace("streams: 4", "streams: four"),
        6,
        "destinations[0].streams: expected a whole number",
    ),
    "streams-zero": (
        GOOD.replace("streams: 4", "streams: 0"),
        6,
        "destinations[0].streams: must be at least 1",
    ),
    "negative-retries": (GOOD.replace("max: 3", "max: -1"), 10, "retries.max: must be at least 0"),
    "missing-source": (
        'campaign: x\ndestinations:\n  - {tier: A, pool: ["root://h//d/"]}\n',
        1,
        "source: required key is missing",
    ),
    "missing-pool": (
        GOOD.replace(
            '    pool: ["gsiftp://se01.cnaf.example/data/", "gsiftp://se02.cnaf.example/data"]\n',
            "",
        ),
        4,
        "destinations[0].pool: required key is missing",
    ),
    "bad-verify": (
        GOOD.replace("verify: both", "verify: bothe"),
        9,
        "checksum.verify: must be one of source, destination (FTS3: target), both, none "
        "(did you mean 'both'?)",
    ),
    "bad-algorithm": (
        GOOD.replace("algorithm: adler32", "algorithm: md5"),
        9,
        "checksum.algorithm: unsupported algorithm 'md5'",
    ),
    "overwrite-not-bool": (
        GOOD + "overwrite: yes please\n",
        12,
        "overwrite: expected true or false",
    ),
    "yaml-syntax": (GOOD.replace("streams: 4", "streams: [4"), 7, "YAML syntax"),
    "bad-campaign-name": (GOOD.replace("sc-t0-t1", "sc t0/t1"), 1, "campaign: bad name"),
    "destinations-not-list": (
        GOOD.split("destinations:")[0] + "destinations: {tier: A}\n",
        3,
        "destinations: expected a list of tiers",
    ),
    "empty-file-list": (
        GOOD.replace('files: {glob: "*.root"}', "files: []"),
        2,
        "source.files: the file list is empty",
    ),
    "glob-with-slash": (
        GOOD.replace('"*.root"', '"a/*.root"'),
        2,
        "source.files.glob: a glob matches names",
    ),
    "min-above-max": (
        GOOD.replace("max_active: 6", "max_active: 6\n    min_active: 8"),
        8,
        "destinations[0].min_active: min_active 8 is above max_active 6",
    ),
    "unknown-selector": (
        GOOD.replace("streams: 4", "streams: 4\n    selector: round-robbin"),
        7,
        "destinations[0].selector: unknown selector 'round-robbin' (did you mean 'round-robin'?)",
    ),
    "relative-file": (
        GOOD.replace('files: {glob: "*.root"}', 'files: ["/etc/passwd"]'),
        2,
        "source.files[0]: '/etc/passwd' must be a file name relative",
    ),
    "bad-adler": (
        GOOD.replace('files: {glob: "*.root"}', "files: [{name: a, size: 1MB, adler32: xyz}]"),
        2,
        "source.files[0].adler32: not an adler32",
    ),
    "two-documents": (GOOD + "---\ncampaign: y\n", 13, "expected exactly one YAML document"),
    "empty-file": ("# nothing\n", 0, "the file is empty"),
    "unknown-endpoint-name": (
        GOOD.replace('"gsiftp://se01.cnaf.example/data/"', '"t9-nope"'),
        5,
        "destinations[0].pool[0]: endpoint name 't9-nope'",
    ),
}
MALFORMED["duplicate-tier"] = (
    GOOD.replace("checksum:", "  - tier: T1-CNAF\n    pool: [\"root://h:1094//d/\"]\nchecksum:"),
    9, "destinations[1].tier: duplicate tier 'T1-CNAF'")


def _resolver(name: str) -> str:
    known = {"t1a-xrd1": "root://127.0.0.1:40123//data/"}
    if name not in known:
        raise KeyError(f"unknown testbed endpoint {name!r}")
    return known[name]


def write(tmp_path, text: str, name: str = "c.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_good_spec(tmp_path):
    spec = load_spec(write(tmp_path, GOOD))
    assert spec.name == "sc-t0-t1"
    assert spec.source.url == "root://t0.example:1094//store/raw/"
    assert spec.source.glob == "*.root" and spec.source.mode == "glob"
    tier = spec.destinations[0]
    assert tier.pool == ("gsiftp://se01.cnaf.example/data/", "gsiftp://se02.cnaf.example/data/")
    assert (tier.streams, tier.max_active, tier.min_active, tier.tcp_buffer) == (4, 6, 1, 4 * 2**20)
    assert spec.retries.max == 3 and spec.retries.backoff == 30.0
    assert spec.timeout == 600.0 and spec.checksum.verify == "both"
    assert spec_from_dict(spec_to_dict(spec)) == spec


def test_explicit_list_and_inventory_names(tmp_path):
    text = textwrap.dedent("""\
        campaign: c1
        source:
          url: t1a-xrd1/store/
          files:
            - a.root
            - {name: sub/b.root, size: 3MB, adler32: 1a2b}
        destinations:
          - tier: T1
            pool: [t1a-xrd1, "t1a-xrd1/other/"]
        third_party: true
        checksum: none
        """)
    spec = load_spec(write(tmp_path, text), resolver=_resolver)
    assert spec.inventory
    assert spec.source.url == "root://127.0.0.1:40123//data/store/"
    assert spec.source.files[1].size == 3_000_000
    assert spec.source.files[1].adler32 == "00001a2b"
    assert spec.destinations[0].pool == ("root://127.0.0.1:40123//data/",
                                         "root://127.0.0.1:40123//data/other/")
    assert spec.third_party and spec.checksum.algorithm is None


def test_list_file_source(tmp_path):
    (tmp_path / "files.txt").write_text("a 10\nb 20 0000abcd\n")
    text = GOOD.replace('files: {glob: "*.root"}', "files: {from: files.txt}")
    spec = load_spec(write(tmp_path, text))
    assert spec.source.mode == "list-file"
    assert spec.source.list_file == str(tmp_path / "files.txt")


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed(tmp_path, case):
    text, line, needle = MALFORMED[case]
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as err:
        load_spec(path, resolver=_resolver)
    msg = str(err.value)
    assert "\n" not in msg
    where = f"{path}:{line}: " if line else f"{path}: "
    assert msg.startswith(where), msg
    assert needle in msg, msg


def test_missing_file(tmp_path):
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(tmp_path / "nope.yaml")


SEVEN_ERRORS = """\
campaign: sc t0
source: {url: "root://t0.example:1094//store/raw/", files: {glob: "*.root"}}
destinations:
  - tier: T1-CNAF
    pool: ["gsftp://se01.cnaf.example/data/"]
    stream: 4
    max_active: zero
checksum: {algorithm: md5, verify: bothe}
retries: {max: -1, backoff: 30s}
timeout: 0
"""


def test_every_error_of_a_file_in_one_run(tmp_path):
    """Issue 22: fixing seven keys took seven runs; now one run names all seven."""
    from gridxfer.errors import SpecErrors
    path = write(tmp_path, SEVEN_ERRORS)
    with pytest.raises(SpecErrors) as info:
        load_spec(path)
    lines = info.value.lines()
    assert lines == [
        f"{path}:1: campaign: bad name 'sc t0': use letters, digits, '.', '_' and '-' (max 128)",
        f"{path}:5: destinations[0].pool[0]: unsupported URL scheme 'gsftp' in "
        f"'gsftp://se01.cnaf.example/data/' (use one of davs, file, ftp, gsiftp, http, https, "
        f"root, roots, xroot)",
        f"{path}:6: destinations[0].stream: unknown key (did you mean 'streams'?)",
        f"{path}:7: destinations[0].max_active: expected a whole number, got 'zero'",
        f"{path}:8: checksum.algorithm: unsupported algorithm 'md5' (use adler32)",
        f"{path}:8: checksum.verify: must be one of source, destination (FTS3: target), both, none "
        f"(did you mean 'both'?)",
        f"{path}:9: retries.max: must be at least 0, got -1",
        f"{path}:10: timeout: must be greater than zero, got 0",
    ]
    assert str(info.value) == lines[0] + " (and 7 more in this file)"


def test_errors_in_several_tiers_and_files(tmp_path):
    text = textwrap.dedent("""\
        campaign: c
        source:
          url: root://h:1094//d/
          files: [a, "/abs", {name: b, size: lots}, a]
        destinations:
          - {tier: A, pool: ["root://h:1094//x/"], streams: 0}
          - {tier: A, pool: []}
          - {pool: ["root://h:1094//y/"]}
        """)
    path = write(tmp_path, text)
    from gridxfer.errors import SpecErrors
    with pytest.raises(SpecErrors) as info:
        load_spec(path)
    fields = [(e.line, e.field) for e in info.value.errors]
    assert fields == [(4, "source.files[1]"), (4, "source.files[2].size"),
                      (4, "source.files[3]"), (6, "destinations[0].streams"),
                      (7, "destinations[1].tier"), (7, "destinations[1].pool"),
                      (8, "destinations[2].tier")], fields


def test_max_active_is_a_ceiling_the_user_may_leave_out(tmp_path):
    """Without max_active the tier's ceiling is picked by the run (engine/ceilings.py), and
    min_active alone is no error; with it, it is kept as given."""
    text = textwrap.dedent("""\
        campaign: c1
        source: {url: "root://t0.example//d/", files: {glob: "*"}}
        destinations:
          - {tier: A, pool: ["root://a.example//d/"], min_active: 8}
          - {tier: B, pool: ["root://b.example//d/"], max_active: 6}
        """)
    spec = load_spec(write(tmp_path, text))
    a, b = spec.destinations
    assert a.auto_ceiling and a.min_active == 8
    assert not b.auto_ceiling and b.max_active == 6
    assert spec_from_dict(spec_to_dict(spec)) == spec


def test_tier_by_name_the_first_of_a_name_and_a_fresh_index_after_replace():
    """CampaignSpec.tier answers from a dict built once (the dispatcher and the FTS3 engine
    ask it once a file), as the scan it replaced: the first tier of a name, StopIteration
    for none; a spec made by dataclasses.replace gets its own."""
    import dataclasses
    from gridxfer.campaign.spec.model import CampaignSpec, SourceSpec, TierSpec
    a, b, c = (TierSpec("T1", ("root://a//d/",)), TierSpec("T1", ("root://b//d/",)),
               TierSpec("T2", ("root://c//d/",)))
    spec = CampaignSpec(name="t", source=SourceSpec(url="file:///s/"), destinations=(a, b, c))
    assert spec.tier("T1") is a and spec.tier("T2") is c and spec.tier("T1") is a
    with pytest.raises(StopIteration):
        spec.tier("T9")
    other = dataclasses.replace(spec, destinations=(c,))
    assert other.tier("T2") is c
    with pytest.raises(StopIteration):
        other.tier("T1")
    assert other != spec and dataclasses.replace(spec) == spec
