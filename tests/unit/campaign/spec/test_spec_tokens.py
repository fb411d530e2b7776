"""``token:`` in campaign files: per source, tier and endpoint; bad entries name file:line."""
from __future__ import annotations

import os
import textwrap

import pytest

from gridxfer.campaign.spec.model import TokenSpec
from gridxfer.campaign.spec.schema import load_spec, spec_from_dict, spec_to_dict
from gridxfer.errors import SpecError

JWT = ("eyJhbGciOiJFUzI1NiIsImtpZCI6ImsifQ.eyJzY29wZSI6InN0b3JhZ2UucmVhZDovIn0."
       "c2lnbmF0dXJlLXBhcnQtb2YtdGhlLXRva2Vu")

GOOD = """\
campaign: tok
source:
  url: "davs://t0.example/data/"
  files: {glob: "*"}
  token: {file: src.tok, base: /data}
destinations:
  - tier: T2
    pool:
      - "davs://se1.example/data/"
      - {url: "davs://se2.example/data/", token: {env: SE2_TOKEN}}
    token: {command: "true --account atlas", timeout: 20s}
  - tier: T3
    pool: ["root://se3.example//data/"]
"""


def write(tmp_path, text: str):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_token_sources_per_source_tier_and_endpoint(tmp_path):
    spec = load_spec(write(tmp_path, GOOD))
    assert spec.source.token == TokenSpec(file=str(tmp_path / "src.tok"), base="/data")
    t2, t3 = spec.destinations
    assert t2.token == TokenSpec(command=("true", "--account", "atlas"), timeout=20.0)
    assert t2.token_for("davs://se2.example/data/") == TokenSpec(env="SE2_TOKEN")
    assert t2.token_for("davs://se1.example/data/") == t2.token
    assert t2.pool == ("davs://se1.example/data/", "davs://se2.example/data/")
    assert t3.token is None and t3.token_for(t3.pool[0]) is None     # discovery
    assert spec_from_dict(spec_to_dict(spec)) == spec                # resume needs no file


def test_discover_and_a_command_as_a_list(tmp_path):
    spec = load_spec(write(tmp_path, GOOD.replace(
        '{command: "true --account atlas", timeout: 20s}', "discover").replace(
        "{env: SE2_TOKEN}", "{command: [/bin/true, a b]}")))
    t2 = spec.destinations[0]
    assert t2.token == TokenSpec() and t2.token.discovery
    assert t2.token_for("davs://se2.example/data/").command == ("/bin/true", "a b")


BAD = {
    "token-inline": ("{file: src.tok, base: /data}", f'"{JWT}"', 5, "does not go into"),
    "env-holds-token": ("{env: SE2_TOKEN}", f"{{env: {JWT}}}", 10, "does not go into the campaign"),
    "two-kinds": ("{env: SE2_TOKEN}", "{env: A, file: b}", 10, "exactly one of file, env"),
    "none": ("{env: SE2_TOKEN}", "{base: /x}", 10, "exactly one of file, env"),
    "unknown-key": ("{env: SE2_TOKEN}", "{envv: A}", 10, "unknown key (did you mean 'env'?)"),
    "no-command": ('"true --account atlas"', '"no-such-token-cmd-x1 a"', 11, "no such command"),
    "empty-command": ('"true --account atlas"', "[]", 11, "the command is empty"),
    "token-in-command": ('"true --account atlas"', f'"echo {JWT}"', 11,
                         "the command line carries a credential"),
    "bearer-in-command": ('"true --account atlas"', '[echo, "Authorization: Bearer abc"]', 11,
                          "the command line carries a credential"),
    "timeout-on-file": ("{file: src.tok, base: /data}", "{file: x, timeout: 3s}", 5,
                        "only a token command has a timeout"),
    "long-timeout": ("timeout: 20s", "timeout: 11m", 11, "at most"),
    "relative-base": ("base: /data", "base: data", 5, "expected an absolute path"),
    "bad-env-name": ("{env: SE2_TOKEN}", "{env: 'A B'}", 10, "not a variable name"),
    "pool-entry-no-url": ('{url: "davs://se2.example/data/", token: {env: SE2_TOKEN}}',
                          "{token: {env: X}}", 10, "url: required key is missing"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_token_entries_name_file_and_line(tmp_path, case):
    old, new, line, text = BAD[case]
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(SpecError) as err:
        load_spec(path)
    msg = str(err.value)
    assert f"{path}:{line}:" in msg and text in msg, msg
    assert "c2lnbmF0dXJl" not in msg


def test_a_token_file_that_is_a_directory_is_refused(tmp_path):
    os.mkdir(tmp_path / "src.tok")
    with pytest.raises(SpecError, match=r":5: .*is a directory"):
        load_spec(write(tmp_path, GOOD))
