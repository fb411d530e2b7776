"""davsession: one urllib3 pool per thread, made again when the X.509 proxy file is
renewed in place (davix reads it for every request; this session once)."""
from __future__ import annotations

import os
import threading

from gridxfer.movers.gfal import davsession


def test_a_renewed_proxy_makes_a_new_session(tmp_path, monkeypatch):
    proxy = tmp_path / "x509up"
    proxy.write_text("not a proxy yet\n")           # unreadable as one: no certificate sent
    monkeypatch.setenv("X509_USER_PROXY", str(proxy))
    first = davsession.session()
    assert davsession.session() is first
    proxy.write_text("renewed, another size\n")
    os.utime(proxy, ns=(1, 1))
    second = davsession.session()
    assert second is not first and davsession.session() is second
    other: list[object] = []
    worker = threading.Thread(target=lambda: other.append(davsession.session()))
    worker.start()
    worker.join()
    assert other[0] is not second                   # one session per thread


def test_auth_sends_a_token_and_never_a_certificate_path(monkeypatch):
    monkeypatch.delenv("BEARER_TOKEN", raising=False)
    assert davsession.auth("davs://se.example/f", "tok") == {"Authorization": "Bearer tok"}
    assert davsession.auth("davs://se.example/f", None) == {}
    monkeypatch.setenv("BEARER_TOKEN", "env")
    assert davsession.auth("davs://se.example/f", None) == {"Authorization": "Bearer env"}
    assert davsession.http_url("davs://se.example:1094/a%20b") == "https://se.example:1094/a%20b"
