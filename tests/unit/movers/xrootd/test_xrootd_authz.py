"""movers/xrootd/authz: a copy's token rides on each request as authz CGI, per server and
thread; the ztn login token sits in a private 0600 file; refusals become class auth."""
from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from urllib.parse import unquote

import pytest

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers.base import TokenPair
from gridxfer.movers.xrootd import authz

SRC, DST = "root://src.invalid:1094//data/a/f", "root://gx3u@dst.invalid:1094//data/b/f"


def test_each_side_gets_its_own_token_only_inside_the_copy(monkeypatch):
    monkeypatch.setenv("BEARER_TOKEN", "the-users-own")      # login: the user's discovery
    assert authz.xpath(SRC) == "/data/a/f"
    with authz.bearer(TokenPair(src="S.T.U", dst="D.E.F"), SRC, DST):
        assert unquote(authz.xpath(SRC)) == "/data/a/f?authz=Bearer S.T.U"
        # the login name does not matter; the token goes with host:port
        assert unquote(authz.xurl("root://gx9p1@dst.invalid:1094//data/b/.f.tmp")) == (
            "root://gx9p1@dst.invalid:1094//data/b/.f.tmp?authz=Bearer D.E.F")
        assert authz.xpath("root://other.invalid//x") == "/x"
        seen = []
        t = threading.Thread(target=lambda: seen.append(authz.xpath(SRC)))
        t.start()
        t.join()
        assert seen == ["/data/a/f"]                            # per thread
    assert authz.xpath(SRC) == "/data/a/f"
    with authz.bearer(None, SRC, DST):
        assert authz.xurl(DST) == DST


def test_the_login_token_file_is_private_and_set_once(monkeypatch):
    monkeypatch.delenv("BEARER_TOKEN", raising=False)
    monkeypatch.delenv("BEARER_TOKEN_FILE", raising=False)
    monkeypatch.setattr(authz, "_login", {})
    authz.login_token("A.B.C")
    path = os.environ["BEARER_TOKEN_FILE"]
    assert Path(path).read_text() == "A.B.C\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    authz.login_token("D.E.F")
    assert os.environ["BEARER_TOKEN_FILE"] == path and Path(path).read_text() == "D.E.F\n"
    assert "D.E.F" not in os.environ.values()
    authz.forget()
    assert not os.path.exists(path)


@pytest.mark.parametrize(("cls", "msg", "tokens", "want"), [
    (ErrorClass.PERMISSION, "x: [ERROR] [3010] Unable to create /data/f; permission denied",
     TokenPair(dst="t"), ErrorClass.AUTH),
    (ErrorClass.PERMISSION, "x: [FATAL] Auth failed: No protocols left to try", None,
     ErrorClass.AUTH),
    (ErrorClass.PERMISSION, "x: [ERROR] [3010] permission denied", None, ErrorClass.PERMISSION),
    (ErrorClass.CONNECTION, "x: connection refused", TokenPair(dst="t"), ErrorClass.CONNECTION),
])
def test_refusals_become_auth(cls, msg, tokens, want):
    out = authz.as_auth(TransferError(cls, msg), tokens)
    assert out.error_class is want and msg in str(out)


def test_forget_and_stale_login_directories(monkeypatch, tmp_path):
    import subprocess
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(authz.tempfile, "tempdir", None)
    dead = subprocess.Popen(["true"])
    dead.wait()
    gone = tmp_path / f"{authz.PREFIX}{dead.pid}-x"
    alive = tmp_path / f"{authz.PREFIX}{os.getppid()}-y"
    for d in (gone, alive):
        d.mkdir()
    monkeypatch.delenv("BEARER_TOKEN", raising=False)
    monkeypatch.delenv("BEARER_TOKEN_FILE", raising=False)
    monkeypatch.setattr(authz, "_login", {})
    authz.login_token("A.B.C")                  # sweeps, then makes its own
    mine = Path(os.environ["BEARER_TOKEN_FILE"]).parent
    assert not gone.exists() and alive.exists() and mine.parent == tmp_path
    authz.forget()
    assert not mine.exists()
