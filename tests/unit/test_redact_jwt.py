"""gridxfer.redact masks a JWT (WLCG/SciTokens bearer token) wherever it appears."""
from __future__ import annotations

import base64

import pytest

from gridxfer.redact import redact, redact_obj
from gridxfer.testbed import tokens as tok_mod


@pytest.fixture(scope="module")
def jwt_token(tmp_path_factory) -> str:
    issuer = tok_mod.make_issuer(tmp_path_factory.mktemp("issuer"))
    return tok_mod.mint(issuer, ["storage.read:/"], lifetime=60)


def signature(tok: str) -> str:
    return tok.rsplit(".", 1)[1]


@pytest.mark.parametrize("template", [
    "{t}",
    "gfal-copy error: 13 - token {t} refused",
    "https://h/f?authz=Bearer%2520{t}",     # double-encoded in a URL
    "Bearer%2520{t}",
    "%20{t}",
    "tok_{t}",                              # glued to a word
    "1{t}",
    '{{"authorization": "Bearer {t}"}}',
    "a\n{t}\nb",
])
def test_a_jwt_is_masked_wherever_it_appears(jwt_token, template):
    out = redact(template.format(t=jwt_token))
    assert signature(jwt_token) not in out and "***" in out


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize("header", [b'{ "alg": "ES256" }', b'{\n  "alg": "ES256"\n}',
                                    b'{\r\n "alg": "RS256"}'])
def test_a_jwt_with_a_spaced_or_pretty_printed_header_is_masked(header):
    tok = f"{_b64(header)}.{_b64(b'{}')}x.c2lnbmF0dXJlLXBhcnQ"
    assert redact(f"t={tok}!") == "t=***!"
    assert "c2lnbmF0dXJlLXBhcnQ" not in redact(f"x {tok} y")


@pytest.mark.parametrize("text", ["ewok-host01.cern-prod.ch", "root://eyeball-se.example.org:1094//d/f.root.1",
                                  "https://ewo0k.example.org/path.to.file", "eyAbcdef.ghijkl.mnop"])
def test_dotted_names_that_merely_start_like_a_jwt_stay(text):
    assert redact(text) == text


def test_redact_obj_masks_a_jwt_inside_structures(jwt_token):
    obj = {"env": {"BEARER_TOKEN": jwt_token},
           "args": ["x", f"-H=Authorization: Bearer {jwt_token}"]}
    assert signature(jwt_token) not in repr(redact_obj(obj))
