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
