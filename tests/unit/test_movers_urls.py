"""movers/urls.py: scheme_of's fast path gives exactly urlsplit's scheme."""
from __future__ import annotations

import timeit
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
]


def _reference(url: str) -> str:
    scheme = urlsplit(url).scheme.lower()
    return SCHEME_ALIASES.get(scheme, scheme)


@pytest.mark.parametrize("url", TRICKY)
def test_scheme_of_matches_urlsplit(url):
    assert scheme_of(url) == _reference(url)


@pytest.mark.parametrize("url", ["root://[::1//x", "root://::1]//x"])
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
