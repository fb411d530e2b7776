"""What FTS3 refuses is refused before any submission (one line, exit 2), and the stand-in
refuses what fts-rest's JobBuilder refuses when the official client sends it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from fts3.rest.client import easy

from gridxfer.cli.main import main

BASE = """
campaign: refuse
engine: fts3
fts3: {{endpoint: "{url}", token: {{file: "{tok}"}}{fts3}}}
source: {{url: "{src}", files: [{{name: a, size: 10}}]}}
destinations:
  - {{tier: t, pool: ["{dst}"]}}
{extra}"""


def run(tmp_path: Path, url: str, *args: str, token: str = "", src: str = "root://s.example//d/",
        dst: str = "root://d.example//x/", fts3: str = "", extra: str = ""):
    tok = tmp_path / "tok"
    tok.write_text(token)
    tok.chmod(0o600)
    f = tmp_path / "c.yaml"
    f.write_text(BASE.format(url=url, tok=tok, src=src, dst=dst, fts3=fts3, extra=extra))
    return main(["campaign", "run", "--quiet", *args, str(f)]), f


@pytest.mark.parametrize("case, kw, message", [
    ("file-source", {"src": "file:///data/"},
     "c.yaml:5: source.url: FTS3 cannot transfer local files"),
    ("file-destination", {"dst": "file:///x/"}, "destinations.t.pool: FTS3 cannot transfer local"),
    ("overwrite-hop", {"fts3": ", overwrite_hop: true"},
     "fts3.overwrite_hop: FTS3 refuses 'overwrite-hop' without a multihop job"),
    ("metadata", {"extra": "job_metadata: {note: " + "x" * 2100 + "}"},
     "FTS3 job_metadata with the campaign's name; FTS3 takes at most 2048"),
    ("reuse", {"fts3": ", reuse: sometimes"}, "fts3.reuse: expected auto, true or false"),
])
def test_invalid_combinations_are_refused_before_submission(tmp_path, gridxfer_home, standin,
                                                            capsys, case, kw, message):
    code, _ = run(tmp_path, standin.url, **kw)
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert standin.posts == []


def test_engine_on_the_command_line_refuses_local_urls(tmp_path, gridxfer_home, standin,
                                                       capsys):
    f = tmp_path / "local.yaml"
    f.write_text('campaign: local\nsource: {url: "root://s.example//d/", files: '
                 '[{name: a, size: 10}]}\ndestinations:\n  - {tier: t, pool: ["file:///x/"]}\n')
    assert main(["campaign", "run", "--quiet", "--fts3", standin.url, str(f)]) == 2
    err = capsys.readouterr().err
    assert "FTS3 cannot transfer local files (file:///x/); use --engine local" in err
    assert standin.posts == []


def _job(**params):
    t = [easy.new_transfer("root://s.example//d/a", "root://d1.example//x/a"),
         easy.new_transfer("root://s.example//d/b", "root://d2.example//x/b")]
    return easy.new_job(t, **params)


@pytest.mark.parametrize("job, refusal", [
    (_job(reuse=True), "Reuse jobs must only contain transfers for the same source"),
    (easy.new_job([easy.new_transfer("file:///d/a", "root://d.example//x/a")]),
     "Can not transfer local files"),
    (_job(overwrite_hop=True), "'overwrite-hop' requires multihop job submission"),
    (_job(metadata={"x": "y" * 2100}), "metadata exceeds size limit of 2048"),
])
def test_the_standin_refuses_what_fts_rest_refuses(standin, job, refusal):
    ctx = easy.Context(standin.url, fts_access_token=standin.token)
    with pytest.raises(easy.exceptions.ClientError, match="Bad request"):
        easy.submit(ctx, job)
    assert refusal in standin.refused[-1] and standin.jobs == {}


def test_the_standin_stores_what_fts_rest_stores(standin):
    ctx = easy.Context(standin.url, fts_access_token=standin.token)
    jid = easy.submit(ctx, _job(priority=9, retry=0, metadata="label me"))
    job = standin.jobs[jid]
    assert job["priority"] == 5                     # clamped 1-5
    assert job["verify_checksum"] == "t"            # a checksum given, verify left False
    assert job["job_metadata"] == {"label": "label me", "auth_method": "oauth2"}
    assert job["job_type"] == "N" and job["retry"] == 0
    assert json.loads(json.dumps(standin.files[jid]))[0]["checksum"] == "ADLER32"


def test_job_metadata_up_to_the_servers_2048_bytes_is_submitted(tmp_path, gridxfer_home,
                                                                 standin, capsys):
    """fts-rest-flask as shipped accepted 1500 bytes and refused 2100 (docs/fts3.md)."""
    code, _ = run(tmp_path, standin.url, token=standin.token,
                  extra="job_metadata: {note: " + "x" * 1500 + "}")
    assert code == 0, capsys.readouterr().err
    assert standin.refused == [] and len(standin.jobs) == 1
    ctx = easy.Context(standin.url, fts_access_token=standin.token)
    easy.submit(ctx, _job(metadata={"x": "y" * 1500}))
    assert standin.refused == [] and len(standin.jobs) == 2


@pytest.mark.parametrize("url", ["", "https://[::1", "https://h:99999", "ftp://u:pw0rd@h",
                                 "https://u:pw0rd@h:8446", "https://h:8446/?access_token=pw0rd",
                                 "https://a\nb:8446", "https://h\x1b[2J:8446", "https://h :8446",
                                 "https://h:8446/#pw0rd"])
def test_a_bad_fts3_url_is_one_line_without_its_secret(tmp_path, gridxfer_home, capsys, url):
    f = tmp_path / "c.yaml"
    f.write_text('campaign: u\nsource: {url: "root://s.example//d/", files: [{name: a, size: 1}]}'
                 '\ndestinations:\n  - {tier: t, pool: ["root://d.example//x/"]}\n')
    assert main(["campaign", "run", "--quiet", "--fts3", url, str(f)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--fts3: " in err, err
    assert "FTS3 URL" in err or "FTS3 REST URL" in err, err
    assert "pw0rd" not in err and "\x1b" not in err


@pytest.mark.parametrize("url", ["https://a\\nb:8446", "https://h:8446/#x", "https://u:p@h"])
def test_a_bad_fts3_endpoint_in_the_campaign_file_is_refused_at_its_line(tmp_path,
                                                                         gridxfer_home, capsys,
                                                                         url):
    f = tmp_path / "c.yaml"
    f.write_text('campaign: u\nengine: fts3\nfts3: {endpoint: "' + url + '"}\n'
                 'source: {url: "root://s.example//d/", files: [{name: a, size: 1}]}\n'
                 'destinations:\n  - {tier: t, pool: ["root://d.example//x/"]}\n')
    assert main(["campaign", "run", "--quiet", str(f)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f"{f}:3: fts3.endpoint" in err, err


@pytest.mark.parametrize("auth, source, tier, message", [
    ("token: {{file: {tok}}}", "", ", archive: {{timeout: 1h}}",
     "destinations.t.archive: FTS3 refuses to archive to tape for a token-authenticated"),
    ("token: {{file: {tok}}}", "bring_online: {{timeout: 1h}}, ", "",
     "source.bring_online: FTS3 refuses to stage from tape for a token-authenticated"),
    ("proxy: /tmp/x509up_gx", "token: {{file: {tok}}}, ", "",
     "source.token: FTS3 keeps storage tokens only from a token-authenticated submission"),
    ("proxy: /tmp/x509up_gx", "", ", token: {{file: {tok}}}",
     "destinations.t.token: FTS3 keeps storage tokens only from a token-authenticated"),
    ("", "", ", token: {{file: {tok}}}", "destinations.t.token: FTS3 keeps storage tokens"),
])
def test_what_fts_rest_refuses_for_the_authentication_is_refused_before_submission(
        tmp_path, gridxfer_home, standin, capsys, auth, source, tier, message):
    """Measured on fts-rest-flask 3.13.4 (docs/fts3.md): tape with a token user -> 400;
    storage tokens from a certificate user -> 409 (t_file's foreign key to t_token)."""
    tok = tmp_path / "tok"
    tok.write_text(standin.token)
    tok.chmod(0o600)
    f = tmp_path / "c.yaml"
    f.write_text((
        "campaign: authref\nengine: fts3\n"
        "fts3: {{endpoint: \"{url}\"" + (", " + auth if auth else "") + "}}\n"
        "source: {{" + source + "url: \"root://s.example//d/\", files: [{{name: a, size: 1}}]}}\n"
        "destinations:\n  - {{tier: t, pool: [\"root://d.example//x/\"]" + tier + "}}\n"
    ).format(url=standin.url, tok=tok))
    assert main(["campaign", "run", "--quiet", str(f)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert standin.posts == [] and standin.token not in err


def test_engine_on_the_command_line_refuses_storage_tokens_without_an_fts3_token(
        tmp_path, gridxfer_home, standin, capsys):
    tok = tmp_path / "tok"
    tok.write_text(standin.token)
    tok.chmod(0o600)
    f = tmp_path / "local.yaml"
    f.write_text(f'campaign: local\nsource: {{url: "root://s.example//d/", files: '
                 f'[{{name: a, size: 10}}], token: {{file: {tok}}}}}\n'
                 f'destinations:\n  - {{tier: t, pool: ["root://d.example//x/"]}}\n')
    assert main(["campaign", "run", "--quiet", "--fts3", standin.url, str(f)]) == 2
    err = capsys.readouterr().err
    assert "source.token: FTS3 keeps storage tokens only" in err and standin.posts == []


@pytest.mark.parametrize("dry", [False, True])
def test_a_bad_fts3_token_is_refused_before_anything_is_planned(tmp_path, gridxfer_home,
                                                                 standin, capsys, dry):
    """`run` planned and journalled the campaign, then refused the token (exit 2), leaving a
    "planned" journal that `run` then refused as existing; `--dry-run` said nothing."""
    code, _ = run(tmp_path, standin.url, *(["--dry-run", "--no-probe"] if dry else []),
                  token="not-a-jwt")
    err = capsys.readouterr().err
    assert code == 2 and "fts3.token:" in err and "JWT" in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert not list((gridxfer_home / "campaigns").glob("*.sqlite*"))
    assert standin.jobs == {}
