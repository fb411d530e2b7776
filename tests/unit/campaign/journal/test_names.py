"""One name per endpoint (journal/names.py): given names kept, the rest the shortest
unique form of the URL, journalled at plan time and read back by every view."""
from __future__ import annotations

import json

from gridxfer.campaign.journal import names, planning, store

# the case: three testbed endpoints on loopback, ephemeral ports, one host
LOOP = ["root://127.0.0.1:41463//data/", "root://127.0.0.1:55375//data/",
        "davs://127.0.0.1:41464/data/", "root://127.0.0.1:41463//other/"]


def test_loopback_endpoints_get_distinct_short_names_nothing_cut():
    got = names.assign(LOOP)
    assert got == {"root://127.0.0.1:41463//data/": "127.0.0.1:41463/data",
                   "root://127.0.0.1:55375//data/": "127.0.0.1:55375",
                   "davs://127.0.0.1:41464/data/": "127.0.0.1:41464",
                   "root://127.0.0.1:41463//other/": "127.0.0.1:41463/other"}
    assert not any("..." in n or "\u2026" in n for n in got.values())


def test_site_hosts_are_named_by_their_first_label_when_unique():
    urls = ["gsiftp://se01.cnaf.example/data/", "gsiftp://se02.cnaf.example/data/",
            "root://se01.pic.example:1094//store/"]
    assert names.assign(urls) == {"gsiftp://se01.cnaf.example/data/": "se01.cnaf.example",
                                  "gsiftp://se02.cnaf.example/data/": "se02",
                                  "root://se01.pic.example:1094//store/": "se01.pic.example"}


def test_given_names_win_and_no_short_form_takes_one():
    urls = ["root://a:1//d/", "root://b:1//d/"]
    got = names.assign(urls, {"root://b:1//d/": "a"})
    assert got["root://b:1//d/"] == "a" and got["root://a:1//d/"] != "a"
    assert len(set(got.values())) == 2


def test_file_urls_by_the_end_of_their_path():
    got = names.assign(["file:///tmp/x/dst/a/", "file:///tmp/y/dst/a/", "file:///tmp/x/b/"])
    assert got == {"file:///tmp/x/dst/a/": "x/dst/a", "file:///tmp/y/dst/a/": "y/dst/a",
                   "file:///tmp/x/b/": "b"}


def test_a_password_never_reaches_a_name():
    got = names.assign(["root://alice:s3cret@h1:1//d/", "root://alice:s3cret@h1:2//d/"])
    assert not any("s3cret" in n for n in got.values()), got


def test_journalled_names_are_read_back_and_unknown_endpoints_named(gridxfer_home):
    conn = store.connect(store.journal_path("n1"), create=True)
    planning.plan(conn, {"name": "n1", "state": "planned",
                      **dict([names.meta_item({LOOP[0]: "t1a-xrd1"})])},
               [("f0", "root://s//f0", 1, "T1", None)])
    conn.execute("INSERT INTO attempts (file_id, tier, endpoint, dst_url, started) "
                 "VALUES (1, 'T1', ?, ?, 0)", (LOOP[1], LOOP[1] + "f0"))
    got = names.read(conn)
    assert got == {LOOP[0]: "t1a-xrd1"}          # the journalled map, no scan of the rows
    assert names.name_of(got, LOOP[1]) == "127.0.0.1:55375"
    # a journal planned before names were journalled: its rows' endpoints are named
    conn.execute("DELETE FROM meta WHERE key = ?", (names.META_KEY,))
    assert names.read(conn) == {LOOP[1]: "127.0.0.1"}       # the only one: its host
    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)",
                 names.meta_item({LOOP[0]: "t1a-xrd1"}))
    # a damaged or hostile entry is not shown as a name
    conn.execute("UPDATE meta SET value = ? WHERE key = ?",
                 (json.dumps({LOOP[0]: "x\x1b[2J"}), names.META_KEY))
    assert names.name_of(names.read(conn), LOOP[0]) == "127.0.0.1:41463"
    conn.close()
