"""davmove.carries: which final names the decoded MOVE names exactly on XrdHttp 5.5.3
(measured: tests/integration/test_davs_movers.py; the table in davmove.py)."""
from __future__ import annotations

import pytest

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers import names
from gridxfer.movers.gfal import davmove

BASE = "davs://se.example:8443/data/"


@pytest.mark.parametrize("name", ["sp ace.dat", "hash#tag.dat", "pct%41.dat", "ünï.dat",
                                  "quote'\".dat", "amp&semi;.dat", "colon:x.dat",
                                  " lead.dat", "plus+sign.dat", "d ir/f ile.dat"])
def test_carried(name):
    assert davmove.carries(names.join_url(BASE, name))


@pytest.mark.parametrize("url", [BASE + "trail.dat%20", BASE + "q%3Fmark.dat",
                                 BASE + "a%0Ab", BASE + "tab%09"])
def test_not_carried(url):
    assert not davmove.carries(url)


def test_a_name_it_cannot_carry_is_refused_before_any_request():
    with pytest.raises(TransferError) as err:
        davmove.move(BASE + ".t.gxpart-1", BASE + "trail.dat%20", "tok")
    assert err.value.error_class is ErrorClass.BAD_NAME


def test_only_within_one_server():
    with pytest.raises(TransferError) as err:
        davmove.move("davs://other:8443/data/.a.gxpart-1", BASE + "a%20b", "tok")
    assert "one davs server" in str(err.value)


class _Answers:
    """A STAND-IN HTTP server (not a WebDAV store): it answers every request with 200 and
    the ``Server`` header it is given, which is all ``server_kind`` reads. XrdHttp itself
    answers ``Server: XrootD/v5.5.3`` (tests/integration/test_davs_movers.py uses it)."""

    def __init__(self, server: str) -> None:
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_OPTIONS(self) -> None:      # noqa: N802 (http.server's name)
                self.send_response(200)
                self.send_header("Server", server)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def version_string(self) -> str:
                return server

            def log_message(self, *args) -> None:
                pass

        self.httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/data/"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize("server, kind, plans", [
    ("XrootD/v5.5.3", "literal", ("raw", "in_place")),       # measured: decoded Destination
    ("XrootD/v5.6.1", "unknown", ("in_place", "in_place")),   # not measured: in place
    ("dCache/9.2.4", "rfc", ("encoded", "encoded")),          # RFC 4918: gfal2's rename
    ("Apache/2.4.57 (Debian)", "rfc", ("encoded", "encoded")),
])
def test_the_destination_is_sent_as_each_server_reads_it(server, kind, plans, monkeypatch):
    monkeypatch.setattr(davmove, "_kinds", {})
    s = _Answers(server)
    try:
        assert davmove.server_kind(s.url) == kind
        hostile, trailing = names.join_url(s.url, "sp ace.dat"), s.url + "trail.dat%20"
        assert (davmove.plan(hostile), davmove.plan(trailing)) == plans
    finally:
        s.close()


def test_a_server_that_does_not_answer_is_asked_again(monkeypatch):
    monkeypatch.setattr(davmove, "_kinds", {})
    import socket
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    url = f"http://127.0.0.1:{port}/data/sp%20ace.dat"
    assert davmove.server_kind(url) == "unknown" and davmove.plan(url) == "in_place"
    assert davmove._kinds == {}
