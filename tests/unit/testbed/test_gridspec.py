"""gridxfer.testbed.gridspec: davs names and the checks of a local grid spec."""
from __future__ import annotations

import pytest

from gridxfer.testbed.gridspec import (AUTH_SERVERS, DEFAULT_SERVERS, LocalGridSpec, ServerSpec,
                                       check_spec)
from gridxfer.testbed.inventory import TestbedError


def test_every_default_xrootd_gets_a_davs_name_and_names_stay():
    names = {s.name: s.davs_alias() for s in DEFAULT_SERVERS}
    assert names == {"t0-xrd": "t0-davs", "t0-gsiftp": "", "t1a-xrd1": "t1a-davs1",
                     "t1a-xrd2": "t1a-davs2", "t1a-gsiftp": "",
                     "t1b-xrd": "t1b-davs", "t1b-ftp": ""}
    assert {s.name: (s.auth, s.davs_alias()) for s in AUTH_SERVERS} == {
        "t2-tok1": ("token", "t2-davs1"), "t2-tok2": ("token", "t2-davs2"),
        "t2-gsi": ("gsi", "t2-gsi-davs")}
    check_spec(LocalGridSpec(servers=DEFAULT_SERVERS + AUTH_SERVERS))


@pytest.mark.parametrize("servers,fragment", [
    ((ServerSpec("a", "gsiftp", "T", auth="token"),), "auth 'token' needs kind xrootd"),
    ((ServerSpec("a", "xrootd", "T", auth="kerberos"),), "auth 'kerberos'"),
    ((ServerSpec("a", "xrootd", "T"), ServerSpec("a-davs", "xrootd", "T")), "davs names clash"),
    ((ServerSpec("a", "xrootd", "T", davs_name="x"), ServerSpec("b", "xrootd", "T", davs_name="x")),
     "davs names clash"),
])
def test_bad_specs_are_refused(servers, fragment):
    with pytest.raises(TestbedError, match=fragment):
        check_spec(LocalGridSpec(servers=servers))
