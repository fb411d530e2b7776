"""gridxfer.testbed.gridspec: davs names and the checks of a local grid spec."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gridxfer.testbed.gridspec import (AUTH_SERVERS, DEFAULT_SERVERS, LocalGridSpec, ServerSpec,
                                       check_spec)
from gridxfer.testbed.inventory import TestbedError


def test_every_default_xrootd_gets_a_davs_name_and_names_stay():
    names = {s.name: s.davs_alias() for s in DEFAULT_SERVERS}
    assert names == {"t0-xrd": "t0-davs", "t0-gsiftp": "", "t1a-xrd1": "t1a-davs1",
                     "t1a-xrd2": "t1a-davs2", "t1a-gsiftp": "",
                     "t1b-xrd": "t1b-davs", "t1b-ftp": "", "t1-tape": "t1-tape-davs"}
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


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="needs root and setpriv")
def test_a_size_limit_without_root_is_refused_up_front():
    """A tmpfs data dir needs root: as an unprivileged user the spec is refused before any
    server starts (the check sat after a raise, so it never ran)."""
    code = ("from gridxfer.testbed.gridspec import LocalGridSpec, ServerSpec, check_spec\n"
            "from gridxfer.testbed.inventory import TestbedError\n"
            "spec = LocalGridSpec(servers=(ServerSpec('a', 'xrootd', 'T', size_limit=1 << 20),))\n"
            "try:\n"
            "    check_spec(spec)\n"
            "except TestbedError as exc:\n"
            "    print(exc)\n")
    src = str(Path(__file__).resolve().parents[3] / "src")
    out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                          sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": src},
                         capture_output=True, text=True, timeout=60, check=True).stdout
    assert "server a: size_limit needs root (tmpfs mount)" in out
    check_spec(LocalGridSpec(servers=(ServerSpec("a", "xrootd", "T", size_limit=1 << 20),)))
