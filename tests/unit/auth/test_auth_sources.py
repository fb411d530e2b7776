"""gridxfer.auth.sources: token files, variables, commands, and WLCG discovery."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from gridxfer.auth.sources import (CommandSource, DiscoverySource, EnvSource, FileSource,
                                   TokenReader, discovery_candidates, read_token, source_from)
from gridxfer.auth.tokens import TokenError
from gridxfer.errors import UsageError


def make(sub="alice", exp_in=3600.0) -> str:
    import time
    key = ec.generate_private_key(ec.SECP256R1())
    return jwt.encode({"sub": sub, "exp": int(time.time() + exp_in), "scope": "storage.read:/"},
                      key, algorithm="ES256")


def token_file(path: Path, value: str, mode: int = 0o600) -> Path:
    path.touch(mode=0o600)
    path.write_text(f"\n  {value}\n")
    os.chmod(path, mode)
    return path


def test_discovery_order_is_the_wlcg_one(tmp_path):
    env = {"BEARER_TOKEN_FILE": str(tmp_path / "f"), "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    uid = os.geteuid()
    assert discovery_candidates(env) == [("env", "BEARER_TOKEN"), ("file", tmp_path / "f"),
                                         ("file", tmp_path / "run" / f"bt_u{uid}"),
                                         ("file", Path(f"/tmp/bt_u{uid}"))]
    assert discovery_candidates({}) == [("env", "BEARER_TOKEN"), ("file", Path(f"/tmp/bt_u{uid}"))]


def test_discovery_takes_the_first_that_holds_a_token(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    token_file(run / f"bt_u{os.geteuid()}", make("from-xdg"))
    token_file(tmp_path / "f", make("from-file"))
    env = {"BEARER_TOKEN": make("from-env"), "BEARER_TOKEN_FILE": str(tmp_path / "f"),
           "XDG_RUNTIME_DIR": str(run)}
    assert read_token(DiscoverySource(), env=env).subject == "from-env"
    env["BEARER_TOKEN"] = "  "                                  # empty: skipped
    tok = read_token(DiscoverySource(), env=env)
    assert tok.subject == "from-file" and tok.origin == f"token file {tmp_path / 'f'}"
    env["BEARER_TOKEN_FILE"] = str(tmp_path / "missing")        # missing file: skipped
    assert read_token(DiscoverySource(), env=env).subject == "from-xdg"


def test_discovery_without_any_token_says_where_it_looked(tmp_path):
    env = {"XDG_RUNTIME_DIR": str(tmp_path)}
    if Path(f"/tmp/bt_u{os.geteuid()}").exists():
        pytest.skip("this machine has a real /tmp/bt_u<uid>")
    with pytest.raises(TokenError, match="BEARER_TOKEN, BEARER_TOKEN_FILE"):
        read_token(DiscoverySource(), env=env)


def test_a_token_file_others_can_read_is_refused(tmp_path):
    path = token_file(tmp_path / "t", make(), mode=0o644)
    with pytest.raises(TokenError, match=r"readable by others \(mode 644\); chmod 600"):
        read_token(FileSource(str(path)))


def test_env_source(monkeypatch):
    monkeypatch.setenv("MY_TOKEN", make("bob"))
    assert read_token(EnvSource("MY_TOKEN")).subject == "bob"
    with pytest.raises(TokenError, match="MY_OTHER is not set"):
        read_token(EnvSource("MY_OTHER"))


def test_a_token_file_is_reread_only_when_it_changes(tmp_path):
    path = token_file(tmp_path / "t", make("first"))
    reader = TokenReader(FileSource(str(path)))
    first = reader.get()
    assert reader.get() is first                       # unchanged: the cached token
    token_file(path, make("second"))
    os.utime(path, ns=(1, 1))                          # a different mtime whatever the clock
    assert reader.get().subject == "second"


def test_a_file_token_expiring_too_soon_is_an_error_until_the_file_is_renewed(tmp_path):
    path = token_file(tmp_path / "t", make(exp_in=30))
    reader = TokenReader(FileSource(str(path)))
    with pytest.raises(TokenError, match="expires in"):
        reader.get(min_validity=600)
    token_file(path, make(exp_in=3600))
    os.utime(path, ns=(2, 2))
    assert reader.get(min_validity=600).expires_in() > 600


def _py(code: str) -> tuple[str, ...]:
    return (sys.executable, "-c", code)


def test_command_source_prints_a_token_and_is_rerun_when_it_runs_short(tmp_path):
    path = token_file(tmp_path / "t", make("cmd"))
    count = tmp_path / "count"
    code = (
        f"import pathlib; c = pathlib.Path({str(count)!r}); c.write_text(c.read_text() + 'x' "
        f"if c.exists() else 'x'); print(); print(pathlib.Path({str(path)!r}).read_text().strip())"
    )
    reader = TokenReader(CommandSource(_py(code)))
    assert reader.get(min_validity=60).subject == "cmd"
    assert reader.get(min_validity=60).subject == "cmd" and count.read_text() == "x"
    with pytest.raises(TokenError, match="expires in"):
        reader.get(min_validity=7200)                  # re-run, still too short
    assert count.read_text() == "xx"


def test_a_failing_command_is_reported_with_its_stderr_redacted(tmp_path):
    secret = make()
    path = token_file(tmp_path / "t", secret)
    code = f"import sys; sys.stderr.write('bad ' + open({str(path)!r}).read()); sys.exit(3)"
    with pytest.raises(TokenError, match="failed \\(exit 3\\): bad \\*\\*\\*") as exc:
        read_token(CommandSource(_py(code)))
    assert secret.rsplit(".", 1)[1] not in str(exc.value)


def test_a_command_that_hangs_is_stopped(tmp_path):
    with pytest.raises(TokenError, match="did not finish within 0.5 s"):
        read_token(CommandSource(_py("import time; time.sleep(30)"), timeout=0.5))
    with pytest.raises(TokenError, match="cannot run the token command"):
        read_token(CommandSource(("/nonexistent/oidc-token", "x")))
    with pytest.raises(TokenError, match="printed no token"):
        read_token(CommandSource(_py("pass")))


def test_the_command_runs_without_a_shell(tmp_path):
    marker = tmp_path / "pwned"
    with pytest.raises(TokenError):
        read_token(CommandSource(("echo", f"x; touch {marker}")))
    assert not marker.exists()


@pytest.mark.parametrize("spec,want", [
    (None, DiscoverySource()),
    ({}, DiscoverySource()),
    ({"file": "/run/t"}, FileSource("/run/t")),
    ({"env": "TOK"}, EnvSource("TOK")),
    ({"command": ["oidc-token", "atlas"]}, CommandSource(("oidc-token", "atlas"), 30.0)),
    ({"command": "oidc-token 'my account'", "timeout": 5},
     CommandSource(("oidc-token", "my account"), 5.0)),
])
def test_source_from_a_campaign_entry(spec, want):
    assert source_from(spec) == want


@pytest.mark.parametrize("spec", [{"file": "/a", "env": "B"}, {"url": "x"}, {"file": ""},
                                  {"command": []}, {"command": ["x"], "timeout": 0},
                                  {"command": ["x"], "timeout": True}, {"env": 3}])
def test_source_from_refuses_bad_entries(spec):
    with pytest.raises(UsageError):
        source_from(spec)
