"""engine/credentials: which token each side of a transfer gets, lifetime and scopes."""
from __future__ import annotations

import os
import time

import jwt
import pytest

from gridxfer.campaign.engine.credentials import (ASSUMED_RATE, COMMAND_RECHECK, MARGIN,
                                                  Credentials, TokenGate, configured,
                                                  needed_seconds, never_usable)
from gridxfer.campaign.spec.model import CampaignSpec, SourceSpec, TierSpec, TokenSpec


def mint(*scopes: str, lifetime: float = 3600) -> str:
    now = int(time.time())
    return jwt.encode({"scope": " ".join(scopes), "exp": now + int(lifetime), "iat": now,
                       "sub": "t"}, "k" * 32, algorithm="HS256")


def write(path, token: str) -> None:
    tmp = path.with_suffix(".new")
    tmp.touch(mode=0o600)
    tmp.write_text(token + "\n")
    os.replace(tmp, path)


def spec(tmp_path, *, src_token=None, dst_token=None, overwrite=False, src="davs://s.invalid/data/"):
    return CampaignSpec(
        name="c", source=SourceSpec(url=src, token=src_token),
        destinations=(TierSpec("T2", ("davs://d.invalid/data/", "root://r.invalid//data/"),
                               token=dst_token),),
        overwrite=overwrite)


def creds(sp, env=None, now=None):
    c = Credentials(sp, env=env or {})
    if now is not None:
        c.clock = now
    return c


SRC, DST = "davs://s.invalid/data/a/f", "davs://d.invalid/data/b/f"


def test_each_side_gets_its_own_token(tmp_path):
    (tmp_path / "s").touch(mode=0o600)
    write(tmp_path / "s", s := mint("storage.read:/a"))
    sp = spec(tmp_path, src_token=TokenSpec(file=str(tmp_path / "s"), base="/data"),
              dst_token=TokenSpec(env="DST_TOK", base="/data"))
    d = mint("storage.create:/b")
    g = creds(sp, env={"DST_TOK": d}).grant("T2", "davs://d.invalid/data/", SRC, DST, 1000)
    assert (g.pause, g.refuse) == (None, None)
    assert (g.tokens.src, g.tokens.dst) == (s, d)
    assert s not in repr(g) and d not in repr(g)


def test_a_local_side_takes_no_token(tmp_path):
    sp = spec(tmp_path, src="file:///tmp/x/", dst_token=TokenSpec(env="T"))
    g = creds(sp, env={"T": mint("storage.create:/")}).grant(
        "T2", "davs://d.invalid/data/", "file:///tmp/x/f", DST, 10)
    assert g.tokens.src is None and g.tokens.dst


def test_a_read_only_token_is_refused_for_writing_naming_the_scope(tmp_path):
    sp = spec(tmp_path, dst_token=TokenSpec(env="T", base="/data"))
    tok = mint("storage.read:/")
    g = creds(sp, env={"T": tok}).grant("T2", "davs://d.invalid/data/", SRC, DST, 10)
    assert g.tokens is None and g.pause is None
    assert "lacks storage.create:/b/f" in g.refuse and "storage.read:/" in g.refuse
    assert tok.split(".")[2] not in g.refuse
    # overwrite needs storage.modify; create alone is refused then
    sp = spec(tmp_path, dst_token=TokenSpec(env="T", base="/data"), overwrite=True)
    g = creds(sp, env={"T": mint("storage.create:/")}).grant(
        "T2", "davs://d.invalid/data/", SRC, DST, 10)
    assert "lacks storage.modify:/b/f" in g.refuse


def test_the_base_maps_scope_paths_to_the_storage(tmp_path):
    sp = spec(tmp_path, dst_token=TokenSpec(env="T", base="/data"))
    ok = creds(sp, env={"T": mint("storage.create:/b")}).grant(
        "T2", "davs://d.invalid/data/", SRC, DST, 10)
    assert ok.refuse is None and ok.tokens.dst
    sp = spec(tmp_path, dst_token=TokenSpec(env="T"))          # base / : /b is not /data/b
    no = creds(sp, env={"T": mint("storage.create:/b")}).grant(
        "T2", "davs://d.invalid/data/", SRC, DST, 10)
    assert "lacks storage.create:/data/b/f" in no.refuse


def test_an_expiring_token_pauses_and_a_refreshed_file_resumes(tmp_path):
    f = tmp_path / "tok"
    write(f, mint("storage.create:/", lifetime=30))
    sp = spec(tmp_path, dst_token=TokenSpec(file=str(f)))
    c = creds(sp)
    g = c.grant("T2", "davs://d.invalid/data/", "file:///x/f", DST, 10)
    assert g.pause and "expires in" in g.pause and "needed" in g.pause and str(f) in g.pause
    gate = TokenGate(c)
    g, ev = gate.grant("T2", "davs://d.invalid/data/", "file:///x/f", DST, 10, now=100.0)
    assert g.pause and [e[0] for e in ev] == ["tier_paused"] and gate.blocked("T2", 100.5)
    _, ev = gate.grant("T2", "davs://d.invalid/data/", "file:///x/f", DST, 10, now=101.0)
    assert ev == []                                  # one message per pause
    write(f, new := mint("storage.create:/", lifetime=3600))
    c._last.clear()                                  # (the 1 s reuse window)
    g, ev = gate.grant("T2", "davs://d.invalid/data/", "file:///x/f", DST, 10, now=102.0)
    assert g.tokens.dst == new and [e[0] for e in ev] == ["tier_resumed"]
    assert not gate.blocked("T2", 102.0)


def test_a_big_file_needs_a_longer_lived_token(tmp_path):
    sp = spec(tmp_path, dst_token=TokenSpec(env="T"))
    env = {"T": mint("storage.create:/", lifetime=MARGIN + 100)}
    assert creds(sp, env=env).grant("T2", "davs://d.invalid/data/", "file:///x/f", DST,
                                    10).pause is None
    big = int(ASSUMED_RATE * 100)                    # expected 100 s, x2 with the margin
    g = creds(sp, env=env).grant("T2", "davs://d.invalid/data/", "file:///x/f", DST, big)
    assert g.pause and "needed" in g.pause
    assert needed_seconds(big, None, 3600) == MARGIN + 200
    # a slow endpoint (its measured rate) needs a longer-lived token for the same file
    small = int(ASSUMED_RATE * 10)                   # 20 s at the assumed rate, 200 s at 1/10
    assert creds(sp, env=env).grant("T2", "davs://d.invalid/data/", "file:///x/f", DST,
                                    small).pause is None
    assert creds(sp, env=env).grant("T2", "davs://d.invalid/data/", "file:///x/f", DST, small,
                                    rate=ASSUMED_RATE / 10).pause
    assert needed_seconds(10**15, None, 600) == 600 + MARGIN    # never beyond the timeout


def test_a_configured_source_without_a_token_pauses(tmp_path):
    sp = spec(tmp_path, dst_token=TokenSpec(file=str(tmp_path / "missing")))
    g = creds(sp).grant("T2", "davs://d.invalid/data/", "file:///x/f", DST, 10)
    assert g.pause and "does not exist" in g.pause
    sp = spec(tmp_path, dst_token=TokenSpec(command=("false",)))
    g = creds(sp).grant("T2", "davs://d.invalid/data/", "file:///x/f", DST, 10)
    assert "failed (exit 1)" in g.pause
    # a failing command is run again every COMMAND_RECHECK s, not every second
    gate = TokenGate(creds(sp))
    gate.grant("T2", "davs://d.invalid/data/", "file:///x/f", DST, 10, now=100.0)
    assert gate.blocked("T2", 100.0 + COMMAND_RECHECK - 1)
    assert not gate.blocked("T2", 100.0 + COMMAND_RECHECK)


def test_discovery_by_default_unchecked_and_none_is_fine(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))       # no bt_u<uid> there
    sp = spec(tmp_path)
    if os.path.exists(f"/tmp/bt_u{os.geteuid()}"):
        pytest.skip("a real /tmp/bt_u<uid> exists here")
    assert creds(sp).grant("T2", "davs://d.invalid/data/", SRC, DST, 10).tokens is None
    tok = mint("storage.read:/elsewhere")          # not checked: not given for this storage
    g = creds(sp, env={"BEARER_TOKEN": tok}).grant("T2", "davs://d.invalid/data/", SRC, DST, 10)
    assert g.tokens.src == tok == g.tokens.dst and g.refuse is None
    sp = spec(tmp_path, dst_token=TokenSpec())      # token: discover -> must find one
    g = creds(sp).grant("T2", "davs://d.invalid/data/", "file:///x/f", DST, 10)
    assert g.pause and "no bearer token found" in g.pause


def test_a_file_being_renewed_mid_run_pauses_where_a_start_refuses_it(tmp_path):
    """oidc-agent / htgettoken rewrite a token file in place: for a moment it is empty or
    half written. Mid-run that pauses the tier until the file is whole again; at a start
    (``never_usable``, for preflight.refuse_tokens) the same file is a reason to refuse;
    a token that is whole but expired is not (a renewer may still replace it)."""
    f = tmp_path / "tok"
    write(f, mint("storage.create:/"))
    ts = TokenSpec(file=str(f))
    c = creds(spec(tmp_path, dst_token=ts))
    assert c.grant("T2", "davs://d.invalid/data/", "file:///x/f", DST, 10).tokens.dst
    assert never_usable(ts) is None
    for partial in ("", "eyJhbGciOi"):
        f.write_text(partial)
        c._last.clear()                                  # (the 1 s reuse window)
        g = c.grant("T2", "davs://d.invalid/data/", "file:///x/f", DST, 10)
        assert g.pause and not g.refuse and str(f) in g.pause, g
        assert str(f) in never_usable(ts)
    write(f, new := mint("storage.create:/"))
    c._last.clear()
    assert c.grant("T2", "davs://d.invalid/data/", "file:///x/f", DST, 10).tokens.dst == new
    write(f, mint("storage.create:/", lifetime=-10))
    assert never_usable(ts) is None                      # expired, but a token
    assert never_usable(TokenSpec(command=("false",))) is None     # not run for this


def test_configured_names_each_source_once_with_the_side_it_serves(tmp_path):
    a, b = TokenSpec(file=str(tmp_path / "a")), TokenSpec(env="B")
    sp = CampaignSpec(
        name="c", source=SourceSpec(url="file:///x/", token=a),        # file://: no token
        destinations=(TierSpec("T2", ("davs://d/data/", "root://r//data/", "file:///y/"),
                               token=a, endpoint_tokens=(("root://r//data/", b),)),
                      TierSpec("T3", ("https://h/data/",), token=a)))
    assert configured(sp) == [("tier T2", a), ("tier T2's endpoint root://r//data/", b)]
