"""A campaign's ``token:`` source that can never give a token (a file others may read, one
that holds no JWT, a missing or empty file, an unset variable) is refused when `run`,
`run --dry-run` or `resume` starts: one line naming the source and the reason, never the
token, exit 2, nothing planned and no server contacted (the destinations here do not
exist). A token that is only too short-lived is not refused: a renewer may replace it (the
tier pauses until it does: tests/unit/campaign/engine, tests/integration/
test_campaign_tokens.py)."""
from __future__ import annotations

import os
import time
from pathlib import Path

import jwt
import pytest

from gridxfer.cli.main import main

JWT = jwt.encode({"scope": "storage.create:/", "exp": int(time.time()) + 3600, "sub": "t"},
                 "k" * 32, algorithm="HS256")
MACAROON = "MDAxY2xvY2F0aW9uIE9wdGlvbmFsLmVtcHR5CjAwMThpZGVudGlmaWVyIGdYeFNlY3JldE1hY2Fyb29u"


def _token_file(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def _campaign(tmp_path: Path, token: str, where: str = "tier") -> Path:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "a.dat").write_bytes(b"x" * 100)
    tier_tok = f"\n    token: {token}" if where == "tier" else ""
    entry_tok = f', {{url: "davs://127.0.0.1:9/data/e/", token: {token}}}' if where == "entry" \
        else ""
    path = tmp_path / "c.yaml"
    path.write_text(f"""campaign: tokf
source: {{url: "file://{src}/", files: {{glob: "*"}}}}
destinations:
  - tier: T2
    pool: ["davs://127.0.0.1:9/data/"{entry_tok}]{tier_tok}
retries: {{max: 0, backoff: 1s}}
timeout: 5s
""")
    return path


def _refused(capsys, argv: list[str], *says: str, secret: str = "") -> None:
    assert main(argv) == 2, argv
    out, err = capsys.readouterr()
    assert len(err.splitlines()) == 1, err
    for s in says:
        assert s in err, (s, err)
    assert "would transfer" not in out, out
    if secret:
        assert secret not in out + err and secret[-20:] not in out + err


@pytest.mark.parametrize("case", ["mode-644", "not-a-jwt", "empty", "missing", "directory"])
@pytest.mark.parametrize("where", ["tier", "entry"])
def test_a_token_file_that_can_never_work_is_refused_at_start(gridxfer_home, tmp_path, capsys,
                                                              case, where):
    tok = tmp_path / "tok"
    text, reason, secret = {
        "mode-644": (JWT, "is readable by others (mode 644); chmod 600", JWT),
        "not-a-jwt": (MACAROON, "does not hold a JWT bearer token", MACAROON),
        "empty": ("\n", "does not exist or is empty", ""),
        "missing": (None, "does not exist or is empty", ""),
        "directory": (None, "is a directory", ""),
    }[case]
    if text is not None:
        _token_file(tok, text, 0o644 if case == "mode-644" else 0o600)
    elif case == "directory":
        (tmp_path / "tokdir").mkdir()
        tok = tmp_path / "tokdir"
    spec = _campaign(tmp_path, f"{{file: {tok}}}", where)
    if case == "directory":                     # the campaign file's own check says it
        assert main(["campaign", "run", "--dry-run", str(spec)]) == 2
        assert "is a directory, not a token file" in capsys.readouterr().err
        return
    for argv in (["campaign", "run", "--dry-run", str(spec)],
                 ["campaign", "run", "--dry-run", "--no-probe", str(spec)],
                 ["campaign", "run", "--quiet", str(spec)]):
        _refused(capsys, argv, f"{spec}: campaign 'tokf': the token of tier T2",
                 f"cannot be used: {'the ' if case != 'mode-644' else ''}token file {tok}",
                 reason, secret=secret)
    assert not list(gridxfer_home.glob("campaigns/tokf.sqlite*"))     # nothing planned


def test_an_unset_variable_and_a_bad_source_token_are_refused_too(gridxfer_home, tmp_path,
                                                                  capsys, monkeypatch):
    monkeypatch.delenv("GX_NO_SUCH_TOKEN", raising=False)
    spec = _campaign(tmp_path, "{env: GX_NO_SUCH_TOKEN}")
    for how in ("--dry-run", "--quiet"):
        _refused(capsys, ["campaign", "run", how, str(spec)], "tier T2",
                 "environment variable GX_NO_SUCH_TOKEN is not set or empty")
    monkeypatch.setenv("GX_NO_SUCH_TOKEN", MACAROON)
    _refused(capsys, ["campaign", "run", "--quiet", str(spec)], "does not hold a JWT",
             secret=MACAROON)
    # the source's token: it was read to list the source (exit 1, a traceback-free line)
    tok = _token_file(tmp_path / "src.tok", JWT, 0o644)
    spec.write_text(spec.read_text().replace(
        f'source: {{url: "file://{tmp_path}/src/", files: {{glob: "*"}}}}',
        f'source: {{url: "davs://127.0.0.1:9/data/", files: [a.dat], token: {{file: {tok}}}}}'))
    for how in ("--dry-run", "--quiet"):
        _refused(capsys, ["campaign", "run", how, str(spec)], "the source", str(tok),
                 "readable by others", secret=JWT)


def test_an_expiring_token_is_not_refused_a_renewer_may_replace_it(gridxfer_home, tmp_path,
                                                                    capsys):
    """Only the lifetime is short: the dry run shows the tier a run would pause (exit 3,
    the files would wait), not a refusal."""
    old = jwt.encode({"scope": "storage.create:/", "exp": int(time.time()) - 10, "sub": "t"},
                     "k" * 32, algorithm="HS256")
    tok = _token_file(tmp_path / "tok", old)
    spec = _campaign(tmp_path, f"{{file: {tok}}}")
    assert main(["campaign", "run", "--dry-run", "--no-probe", str(spec)]) == 0
    assert main(["campaign", "run", "--dry-run", str(spec)]) == 3
    out, err = capsys.readouterr()
    assert "tier T2 paused: no usable token for the destination" in out and "expired" in out
    assert old not in out + err


def test_resume_refuses_a_token_file_gone_bad(gridxfer_home, tmp_path, capsys):
    """A resume starts as a run does: a token file made unusable meanwhile is refused."""
    tok = _token_file(tmp_path / "tok", JWT)
    spec = _campaign(tmp_path, f"{{file: {tok}}}")
    assert main(["campaign", "run", "--quiet", str(spec)]) == 3     # nothing listens there
    capsys.readouterr()
    os.chmod(tok, 0o644)
    _refused(capsys, ["campaign", "resume", "--quiet", "--retry-failed", "tokf"], "tier T2",
             str(tok), "readable by others", secret=JWT)
