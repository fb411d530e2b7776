"""movers/names.py: the one rule for file names in URLs, as a generated table (hypothesis
is not installed here): every name either round-trips through its protocol's URL to the
same path under the directory, or is refused with class bad_name."""
from __future__ import annotations

import itertools
import os
import random
from urllib.parse import unquote

import pytest

from gridxfer.errors import ErrorClass, TransferError
from gridxfer.movers import names, toolurls
from gridxfer.movers.urls import local_path

BASES = {"root": "root://h:1094//data/dir/", "gsiftp": "gsiftp://h:2811/data/dir",
         "ftp": "ftp://h/data/dir/", "file": "file:///data/dir", "bare": "/data/dir",
         "davs": "davs://h/data/dir/"}
HOSTILE = ["a?b", "a#b", "a%2fb", "%2f%2e%2e%2fsecret", "a b", "ü.root", "x%3fy", "-rf",
           "data.root?oss.asize=5", "a%00b", "%2e%2e", "..%2f..%2fetc", "a;b", "a&b", "a+b",
           "~user", "a\\b", "sub/ok.root", "a%", "%zz", "'", '"', "$(id)", "a:b", "@x", "a=b,c"]
BAD = ["", ".", "..", "a/../b", "/abs", "a/", "a//b", "./a", "a/.", "a\nb", "a\rb", "a\x00b",
       "\x7f", "a\x85b", "a\u2028b", "\tx", "..\\../x"[:2]]


def _classify(base: str, name: str):
    try:
        return names.join_url(base, name)
    except TransferError as exc:
        assert exc.error_class is ErrorClass.BAD_NAME
        assert repr(name) in str(exc)
        return None


def _seen_path(url: str) -> str:
    """The path the protocol's tools read (decoding where they decode)."""
    return names.server_path(url)


def _table():
    rnd = random.Random(17)
    alphabet = "ab/.%2fe?#: \x00\n\x7fü~+"
    rows = [(s, n) for s in BASES for n in HOSTILE + BAD]
    rows += [(rnd.choice(list(BASES)),
              "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 8))))
             for _ in range(3000)]
    return rows


def test_every_name_round_trips_or_is_refused():
    for scheme, name in _table():
        base = BASES[scheme]
        url = _classify(base, name)
        parts = name.split("/")
        legal = (name and all(p not in ("", ".", "..") for p in parts)
                 and not any(ord(c) < 32 or 0x7f <= ord(c) <= 0x9f or c in "\u2028\u2029"
                             for c in name)
                 and not (scheme in ("root", "davs", "https") and "?" in name)
                 and not (scheme == "ftp" and not name.isascii()))
        assert (url is not None) == bool(legal), (scheme, name, url)
        if url is None:
            continue
        root = names.server_path(base).rstrip("/")
        assert _seen_path(url) == f"{root}/{name}", (scheme, name, url)
        names.check_within(base, url) if scheme not in ("file", "bare") else None
        names.check_url(url)
        assert names.listed_name(url) == name.rpartition("/")[2]


@pytest.mark.parametrize("name", ["a?b", "a#b", "a%2fb", "%2f%2e%2e%2fsecret", "a b", "ü.root",
                                  "x%3fy", "-rf", "sub/x.root"])
def test_quoting_per_protocol(name):
    assert names.join_url("file:///d/", name) == "file:///d/" + name
    gs = names.join_url("gsiftp://h/d/", name)
    assert unquote(gs.split("/d/", 1)[1]) == name and "?" not in gs and "#" not in gs
    assert gs.isascii() and " " not in gs
    if "?" in name:
        with pytest.raises(TransferError, match="bad_name"):
            names.join_url("root://h//d/", name)
    else:
        assert names.join_url("root://h//d/", name) == "root://h//d/" + name


@pytest.mark.parametrize("name", ["ä1.txt", "ü.root", "sub/\u00e9t\u00e9", "\u202eevil"])
def test_ftp_refuses_non_ascii_names_gsiftp_carries_them(name):
    """globus-gridftp-server drops every byte outside 32-126 from a clear-text (ftp://)
    command: 'STOR ä1.txt' wrote '1.txt' (tests/integration/test_hostile_names.py)."""
    with pytest.raises(TransferError, match="ftp:// cannot carry a non-ASCII") as exc:
        names.join_url("ftp://h/d/", name)
    assert exc.value.error_class is ErrorClass.BAD_NAME and not exc.value.retryable
    url = names.join_url("gsiftp://h/d/", name)
    assert names.server_path(url) == "/d/" + name
    for bad in (url.replace("gsiftp:", "ftp:"), "ftp://h/d/" + name):   # encoded, or raw
        with pytest.raises(TransferError, match="non-ASCII"):
            names.check_url(bad)
    names.check_url(url)
    assert names.quote_name("ftp", name, check=False)       # listings never raise


def test_plain_names_are_unchanged_everywhere():
    for base in BASES.values():
        assert names.join_url(base, "run1/f000001.root") == base.rstrip("/") + "/run1/f000001.root"


@pytest.mark.parametrize("url", [
    "gsiftp://h/d/a%2f..%2f..%2fetc%2fpasswd", "gsiftp://h/d/%2e%2e/x", "gsiftp://h/d/../x",
    "root://h//d/../x", "root://h//d/x?oss.asize=5", "file:///d/../etc/passwd", "/d/./x",
    "gsiftp://h/d/a%0d%0aDELE%20x", "root://h//d/a\nb", "file:///d/a\x00b", "ftp://h/d/%2F"])
def test_movers_refuse_urls_that_escape(url):
    with pytest.raises(TransferError) as exc:
        names.check_url(url)
    assert exc.value.error_class is ErrorClass.BAD_NAME
    assert not exc.value.retryable


@pytest.mark.parametrize("url", ["gsiftp://h/d/a%252fb", "root://h//d/a%2fb", "root://h//d/a#b",
                                 "file:///d/a?b#c", "gsiftp://h//d/x", "root://u@h:1094//d/x"])
def test_movers_take_urls_that_stay(url):
    names.check_url(url)


def test_server_path_is_what_the_tool_reads():
    assert names.server_path("gsiftp://h/d/a%3Fb") == "/d/a?b"
    assert names.server_path("root://h//d/a%3Fb") == "/d/a%3Fb"
    assert names.server_path("root://h//d/a#b?x=1") == "/d/a#b"
    assert names.server_path("file:///d/a%3Fb?c") == "/d/a%3Fb?c"
    with pytest.raises(TransferError, match="control character"):
        names.server_path("gsiftp://h/d/a%0d%0aDELE%20%2Fetc")


def test_gfal_and_globus_get_their_own_encoding():
    assert toolurls.gfal_url("root://h//d/f.root") == "root://h//d/f.root"
    assert unquote(toolurls.gfal_url("root://h//d/a%2fb c")) == "root://h//d/a%2fb c"
    assert "%252f" in toolurls.gfal_url("root://h//d/a%2fb")
    assert toolurls.gfal_url("gsiftp://h/d/a%20b") == "gsiftp://h/d/a%20b"
    assert toolurls.tool_url("file:///d/%2f%2e%2e%2fsecret") == "file:///d/%252f%252e%252e%252fsecret"
    assert unquote(toolurls.tool_url("/d/a b#c")) == "file:///d/a b#c"


def test_realpath_containment(tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (tmp_path / "secret").write_text("x")
    (src / "ok").write_text("y")
    os.symlink(tmp_path / "secret", src / "link")
    os.symlink(tmp_path, src / "sub" / "up")
    base = f"file://{src}/"
    names.check_within(base, names.join_url(base, "ok"))
    names.check_within(base, names.join_url(base, "new/dir/file"))   # not there yet: fine
    for name in ("link", "sub/up/secret", "sub/up/anything"):
        with pytest.raises(TransferError, match="resolves outside"):
            names.check_within(base, names.join_url(base, name))
    with pytest.raises(TransferError, match="outside"):
        names.check_within("root://h//d/", "root://h//e/x")
    names.check_within("root://h//d/", "root://h:1094//d//x")


def test_check_transfer_wants_exactly_the_rule_s_urls():
    names.check_transfer("a b", "gsiftp://h/s", "gsiftp://h/s/a%20b", "file:///tmp/d/",
                         "file:///tmp/d/a b")
    with pytest.raises(TransferError, match="is not its URL"):
        names.check_transfer("a", "gsiftp://h/s", "gsiftp://h/s/a/../../x", "file:///d", "file:///d/a")
    with pytest.raises(TransferError, match="bad_name"):
        names.check_transfer("a?b", "file:///s", "file:///s/a?b", "root://h//d", "root://h//d/a?b")


def test_quote_name_never_raises_when_not_checking():
    for scheme, name in itertools.islice(_table(), 2000):
        names.join_url(BASES[scheme], name, check=False)


def test_local_path_of_a_joined_name_is_the_literal_name():
    for name in HOSTILE:
        assert local_path(names.join_url("file:///d", name)) == "/d/" + name


@pytest.mark.parametrize("scheme", ["davs", "https"])
def test_http_names_are_percent_encoded_and_refuse_a_question_mark(scheme):
    """XrdHttp decodes %XX, then cuts the path at a decoded '?' as at CGI (measured:
    PUT a%3Fb writes the file a), so no escape carries '?' (test_davs_movers.py)."""
    base = f"{scheme}://h:1/data/"
    assert names.join_url(base, "a b#c%d+e ü") == base + "a%20b%23c%25d+e%20%C3%BC"
    assert toolurls.encoded(names.join_url(base, "a b"))
    assert not toolurls.encoded(base + "run1/f.root")
    with pytest.raises(TransferError, match="bad_name"):
        names.join_url(base, "a?b")
    with pytest.raises(TransferError, match="bad_name"):
        names.check_url(base + "a%3Fb")


@pytest.mark.parametrize("name", ["bad\udcff.dat", "d/\udc80x", "\ud800"])
def test_a_name_that_is_not_utf8_is_a_bad_name(name):
    """os.fsdecode of non-UTF-8 bytes: gfal2 and XrdCl raised UnicodeEncodeError on it."""
    assert not names.valid_utf8(name)
    with pytest.raises(TransferError, match="not valid UTF-8") as caught:
        names.check_name(name)
    assert caught.value.error_class is ErrorClass.BAD_NAME


def test_real_path_is_realpath_from_the_kernel(tmp_path):
    """names.real_path (O_PATH + /proc/self/fd) agrees with os.path.realpath on links,
    relative links, '..' after a link, a missing name and a FIFO (not opened for I/O)."""
    from gridxfer.movers.names import real_path
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f").write_text("x")
    os.symlink(tmp_path / "a" / "b" / "f", tmp_path / "abs")
    os.symlink("b", tmp_path / "a" / "rel")
    os.symlink("/etc/hostname", tmp_path / "a" / "out")
    os.symlink(tmp_path / "abs", tmp_path / "chain")
    os.mkfifo(tmp_path / "fifo")
    for name in ("a/b/f", "abs", "a/rel/f", "a/rel/../b/f", "a/out", "chain", "missing",
                 "a/missing/../b", "fifo"):
        path = str(tmp_path / name)
        assert real_path(path) == os.path.realpath(path), name



@pytest.mark.parametrize("name", ["L" * 256, "\u00e4" * 128, "d/" + "L" * 256 + "/f",
                                  "\u00e4" * 127 + "xy"])
def test_a_component_longer_than_name_max_is_a_bad_name(name):
    """NAME_MAX is 255 bytes (UTF-8), not characters: 'ä' * 128 is 256 bytes."""
    for base in BASES.values():
        with pytest.raises(TransferError, match=r"longer than NAME_MAX \(255 bytes") as exc:
            names.join_url(base, name)
        assert exc.value.error_class is ErrorClass.BAD_NAME
        url = names.join_url(base, name, check=False)     # listings never raise
        ftp = base.startswith("ftp:") and not name.isascii()
        with pytest.raises(TransferError, match="non-ASCII" if ftp else "NAME_MAX"):
            names.check_url(url)


@pytest.mark.parametrize("name", ["L" * 255, "\u00e4" * 127 + "x", "d/" + "L" * 255])
def test_names_up_to_name_max_are_carried(name):
    for scheme, base in BASES.items():
        if scheme == "ftp" and not name.isascii():
            continue
        names.check_url(names.join_url(base, name))
