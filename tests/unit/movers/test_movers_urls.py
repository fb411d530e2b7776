"""movers/urls.py: scheme_of's fast path gives exactly urlsplit's scheme."""
from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from gridxfer.movers import urls
from gridxfer.movers.urls import SCHEME_ALIASES, scheme_of

TRICKY = [
    "root://t0.example:1094//store/raw/f.root", "ROOT://host//x", "xroot://h//x", "gsiftp://h/p",
    "gridftp://h/p", "ftp://h/p", "file:///tmp/x", "/tmp/plain/path", "relative/path", "",
    "https://h/p?q=1#f", "davs://h:443/p", "s3+https://h/b", "a.b-c+d://h/", "1root://h/x",
    "-x://h", "C:\\\\windows\\\\path", "c:/x", "no-colon", ":leading", "root:/single-slash",
    "/path/with://inside", "file.dat:odd", "root://h//a:b/c", "x:y:z", "root:", "r",
    " root://h//x", "\x00root://h//x", "ro\not://h//x", "root://h\t//x", "ro\tot://h",
    "root://[::1]:1094//data/x", "root://[2001:db8::1]//x", "root://höst.example//x",
    "röot://h//x", "fïle:///x", "root\u00a0://h",
    # the known heads (urls._KNOWN) and what must still take the careful way
    "roots://h//x", "xroots://h//x", "file:relative", "https://[::1]/x", "srm://h/x",
    "s3://b/k", "dav://h/x", "root://h/\u00e9", "root:\t//h", "root://h:1094//x\n",
]


def _reference(url: str) -> str:
    scheme = urlsplit(url).scheme.lower()
    return SCHEME_ALIASES.get(scheme, scheme)


@pytest.mark.parametrize("url", TRICKY)
def test_scheme_of_matches_urlsplit(url):
    assert scheme_of(url) == _reference(url)


@pytest.mark.parametrize("url", ["root://[::1//x", "root://::1]//x", "root://h\uff0fx//y",
                                 "https://[bad/x"])
def test_malformed_ipv6_still_raises_like_urlsplit(url):
    with pytest.raises(ValueError):
        urlsplit(url)
    with pytest.raises(ValueError):
        scheme_of(url)


def test_scheme_of_fuzz_against_urlsplit():
    import random
    rnd = random.Random(7)
    alphabet = "rootgsifpxRT0:/.+-[]@ \t\n\x01é"
    for _ in range(20000):
        url = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 14)))
        try:
            want = _reference(url)
        except ValueError:
            with pytest.raises(ValueError):
                scheme_of(url)
            continue
        assert scheme_of(url) == want, repr(url)


def test_plain_urls_do_not_go_through_urlsplit(monkeypatch):
    """The fast path is the point: the campaign hot path asks several times per file."""
    def boom(*a, **k):
        raise AssertionError("urlsplit called")
    monkeypatch.setattr(urls, "urlsplit", boom)
    assert scheme_of("root://127.0.0.1:1094//data/g/f000001.dat") == "root"
    assert scheme_of("file:///dev/shm/src/f.dat") == "file"
    assert scheme_of("/dev/shm/src/f.dat") == "file"
    with pytest.raises(AssertionError):
        scheme_of("root://[::1]:1094//x")      # brackets: the careful path


def _reference_local_path(url: str) -> str:
    """urlsplit's reading, except that a local path is never cut: '?' and '#' are part of
    it (movers/names.py), and nothing is decoded."""
    from gridxfer.errors import UsageError
    parts = urlsplit(url.replace("?", "\ue000").replace("#", "\ue001"))
    if parts.scheme not in ("", "file"):
        raise UsageError("not local")
    if parts.netloc not in ("", "localhost"):
        raise UsageError("remote host")
    return parts.path.replace("\ue000", "?").replace("\ue001", "#") or "/"


@pytest.mark.parametrize("url, path", [
    ("file:///d/a?b", "/d/a?b"), ("file:///d/a#b", "/d/a#b"),
    ("/d/x?oss.asize=5", "/d/x?oss.asize=5"),
    ("file:///d/a%2f..%2fb", "/d/a%2f..%2fb"), ("file:///d/a b", "/d/a b"),
    ("file:///d/ü", "/d/ü")])
def test_local_path_is_never_cut_nor_decoded(url, path):
    from gridxfer.movers.urls import local_path
    assert local_path(url) == path


LOCAL = ["file:///dev/shm/src/f000001.dat", "file:////double/x", "file:///", "file://localhost/x",
         "file://host/x", "FILE:///x", "/plain/path", "//host/x", "/a:b/c", "relative/x",
         "file:///a?b", "file:///a#b", "/a?b", "file:///a b", "file:///é", "root://h//x",
         "file:", "", "/", "file:/x", "file:x"]


def _outcome(fn, url):
    from gridxfer.errors import UsageError
    try:
        return ("ok", fn(url))
    except UsageError:
        return ("usage", None)
    except ValueError:
        return ("value", None)


@pytest.mark.parametrize("url", LOCAL)
def test_local_path_matches_the_urlsplit_reading(url):
    from gridxfer.movers.urls import local_path
    assert _outcome(local_path, url) == _outcome(_reference_local_path, url)


def test_local_path_fuzz_and_fast_path(monkeypatch):
    import random
    from gridxfer.movers.urls import local_path
    rnd = random.Random(11)
    alphabet = "fileroot:/.?#[]h \t\x01é"
    for _ in range(20000):
        url = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 12)))
        assert _outcome(local_path, url) == _outcome(_reference_local_path, url), repr(url)
    monkeypatch.setattr(urls, "urlsplit", lambda *a, **k: pytest.fail("urlsplit called"))
    assert local_path("file:///dev/shm/src/f000001.dat") == "/dev/shm/src/f000001.dat"
    assert local_path("/dev/shm/src/f.dat") == "/dev/shm/src/f.dat"


@pytest.mark.parametrize("url,server", [
    ("root://h.example:1094//data/a/f", "root://h.example:1094"),
    ("davs://u@h:443/data/f?authz=x", "davs://u@h:443"),
    ("gsiftp://h/data/", "gsiftp://h"),
    ("file:///tmp/x/y", "file://"),
])
def test_server_of_is_the_scheme_and_authority_as_written(url, server):
    """One key per server for sessions opened ahead, tape requests and recovery."""
    assert urls.server_of(url) == server
