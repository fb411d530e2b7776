"""`gridxfer testbed token` and the token part of `gridxfer testbed env` (no servers needed:
an inventory that names the testbed's issuer)."""
from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import jwt
import pytest

from gridxfer import state
from gridxfer.cli.main import main
from gridxfer.testbed import tokens as tok_mod
from gridxfer.testbed.inventory import INVENTORY_NAME, Inventory


@pytest.fixture
def issuer(gridxfer_home, tmp_path):
    iss = tok_mod.make_issuer(tmp_path / "issuer")
    inv = Inventory(mode="local", endpoints={}, env={"X509_CERT_DIR": "/x/certs"},
                    base_dir=str(tmp_path), extra={"issuer": str(tmp_path / "issuer")})
    state.write_json(gridxfer_home / "testbed" / INVENTORY_NAME, inv.to_json())
    return iss


def claims_of(tok: str, iss) -> dict:
    return jwt.decode(tok, jwt.PyJWK(iss.jwks()["keys"][0]).key, algorithms=["ES256"],
                      audience=iss.audience)


def test_token_prints_a_signed_token_with_the_given_scopes(issuer, capsys):
    assert main(["testbed", "token", "--scope", "storage.create:/up", "--scope",
                 "storage.read:/ storage.stage:/tape", "--lifetime", "10m"]) == 0
    tok = capsys.readouterr().out.strip()
    claims = claims_of(tok, issuer)
    assert claims["scope"] == "storage.create:/up storage.read:/ storage.stage:/tape"
    assert claims["exp"] - claims["iat"] == 600 and claims["wlcg.ver"] == "1.0"


def test_token_defaults_to_read_everything_for_an_hour(issuer, capsys):
    assert main(["testbed", "token", "--subject", "robot", "--audience", "https://se.example"]) == 0
    tok = capsys.readouterr().out.strip()
    claims = jwt.decode(tok, options={"verify_signature": False})
    assert (claims["scope"], claims["sub"], claims["aud"]) == ("storage.read:/", "robot", "https://se.example")
    assert claims["exp"] - claims["iat"] == 3600


@pytest.mark.parametrize("argv,fragment", [
    (["--scope", "storage.read"], "a storage scope needs a path"),
    (["--scope", "storage.create:sub"], "a storage scope needs a path"),
    (["--scope", " "], "at least one scope"),
    (["--lifetime", "0s"], "Invalid value for '--lifetime': '0s': must be more than 0"),
    (["--lifetime", "8d"], "--lifetime"),
    (["--lifetime", "soon"], "soon"),
])
def test_token_refuses_bad_arguments_with_one_line(issuer, capsys, argv, fragment):
    assert main(["testbed", "token", *argv]) == 2
    err = capsys.readouterr().err
    assert fragment in err and len(err.strip().splitlines()) == 1


def test_token_without_a_testbed_is_exit_1(gridxfer_home, capsys):
    assert main(["testbed", "token"]) == 1
    assert "no testbed is up" in capsys.readouterr().err


def test_env_writes_a_private_token_file_and_never_prints_the_token(issuer, gridxfer_home, capsys):
    assert main(["testbed", "env", "--token-lifetime", "2h"]) == 0
    out = capsys.readouterr().out
    path = gridxfer_home / "testbed" / "bearer-token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    tok = path.read_text().strip()
    assert tok.rsplit(".", 1)[1] not in out and "eyJ" not in out
    assert f"export BEARER_TOKEN_FILE={path}" in out.splitlines()
    assert "export X509_CERT_DIR=/x/certs" in out.splitlines()
    claims = claims_of(tok, issuer)
    assert (
        claims["scope"] == "storage.read:/ storage.modify:/"
        and claims["exp"] - claims["iat"] == 7200
    )
    # what a shell makes of it: BEARER_TOKEN (for gfal2) holds the file's token
    res = subprocess.run(["bash", "-c", out + '\nprintf %s "$BEARER_TOKEN"'], capture_output=True,
                         text=True, env={"PATH": os.environ["PATH"]})
    assert res.stdout == tok


def test_env_of_a_testbed_without_an_issuer_sets_no_token(gridxfer_home, tmp_path, capsys):
    inv = Inventory(mode="local", endpoints={}, env={"X509_CERT_DIR": "/x"}, base_dir=str(tmp_path))
    state.write_json(Path(gridxfer_home) / "testbed" / INVENTORY_NAME, inv.to_json())
    assert main(["testbed", "env"]) == 0
    assert "BEARER" not in capsys.readouterr().out


def test_token_of_a_testbed_without_an_issuer_is_one_line_exit_1(gridxfer_home, tmp_path, capsys):
    inv = Inventory(mode="netns", endpoints={}, env={}, base_dir=str(tmp_path))
    state.write_json(Path(gridxfer_home) / "testbed" / INVENTORY_NAME, inv.to_json())
    assert main(["testbed", "token"]) == 1
    assert "has no token issuer" in capsys.readouterr().err
