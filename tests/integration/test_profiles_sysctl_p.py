"""Every bundled profile works with the real `sysctl -p FILE`, as its header promises, and
`sysctl -p` reads each file the way gridxfer's own loader does.

Run inside a network namespace the test creates. Keys that are not the namespace's own
(kernel.*, vm.*, net.core.rmem_max, tcp_mem, ...: the kernel is asked, as `tune apply
--skip-global` does) would change the whole host: they are left out of the copy given to
`sysctl -p` and only read (`sysctl -n`) on the host, never written.
"""
from __future__ import annotations

import os
import re
import subprocess

import pytest

from gridxfer.tuning.profile import list_profiles, load_profile
from gridxfer.tuning.targets.base import proc_path
from gridxfer.tuning.targets.netns import NetnsTarget
from gridxfer.tuning.testing import scratch_netns

pytestmark = [pytest.mark.root, pytest.mark.integration]

BUNDLED = [p for p in list_profiles() if p.parent.name == "sysctl-profiles"]
ASSIGNMENT = re.compile(r"\s*(-?)\s*([^#;=\s][^=]*?)\s*=")


@pytest.fixture(scope="module")
def ns():
    if os.geteuid() != 0:
        pytest.skip("needs root")
    with scratch_netns() as n:
        yield n


def _key(line: str) -> str | None:
    m = ASSIGNMENT.match(line)
    return m.group(2) if m and not line.lstrip().startswith(("#", ";")) else None


def test_every_bundled_profile_is_here():
    names = {p.stem for p in BUNDLED}
    assert {"cnaf-sc-wan-1g", "wan-1g-18ms-modern", "daq-udp-lossless", "dtn-10g", "dtn-40g",
            "dtn-100g", "lan-10ge-jumbo", "untuned-legacy"} <= names


@pytest.mark.parametrize("path", BUNDLED, ids=[p.stem for p in BUNDLED])
def test_sysctl_p_applies_the_profile_as_gridxfer_reads_it(ns, path, tmp_path):
    prof = load_profile(str(path))
    keys = [s.key for s in prof.sysctl]
    global_keys = NetnsTarget(ns.name).out_of_scope(keys)          # key -> reason
    own = [s for s in prof.sysctl if s.key not in global_keys]
    assert own, f"{path.name}: nothing a namespace can take"
    # the file itself, minus the global keys' lines (comments and order kept)
    lines = path.read_text().splitlines()
    assert all(_key(line) in keys for line in lines if _key(line) is not None)
    copy = tmp_path / path.name
    copy.write_text("".join(line + "\n" for line in lines if _key(line) not in global_keys))
    before = {s.key: ns.sysctl(s.key) for s in own}
    try:
        p = subprocess.run(["ip", "netns", "exec", ns.name, "sysctl", "-p", str(copy)],
                           capture_output=True, text=True, timeout=60)
        assert (p.returncode, p.stderr) == (0, ""), p.stderr
        # sysctl's reading of the file == gridxfer's (keys, values, order)
        printed = [tuple(line.split(" = ", 1)) for line in p.stdout.splitlines()]
        assert [(k, " ".join(v.split())) for k, v in printed] == [(s.key, s.value) for s in own]
        # and what the kernel holds now (tcp_rmem reads back tab-separated)
        for s in own:
            assert ns.sysctl(s.key).split() == s.value.split(), s.key
    finally:
        for key, value in before.items():
            ns.exec("sysctl", "-q", "-w", f"{key}={value}")
    assert {s.key: ns.sysctl(s.key) for s in own} == before
    # the global keys: read on the host, never written. A net.* key must exist; a kernel.* key
    # may be compiled out (kernel.sysrq without CONFIG_MAGIC_SYSRQ)
    for key in global_keys:
        if not key.startswith("net.") and not os.path.exists(proc_path(key)):
            continue
        r = subprocess.run(["sysctl", "-n", key], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0 and r.stdout.strip() and not r.stderr, (key, r.stderr)


def test_sysctl_p_ignores_what_the_loader_would_honour(ns, tmp_path):
    """Why the bundled files use neither `# include:` nor the '-' prefix: procps' `sysctl -p`
    skips the include (a comment) and reports a missing '-' key as an error, exit 1."""
    (tmp_path / "base.conf").write_text("net.ipv4.tcp_mtu_probing = 2\n")
    top = tmp_path / "top.conf"
    top.write_text("# include: base\nnet.ipv4.tcp_sack = 1\n-net.ipv4.no_such_key_gx = 1\n")
    prof = load_profile(str(top))
    assert {s.key for s in prof.sysctl} == {"net.ipv4.tcp_mtu_probing", "net.ipv4.tcp_sack",
                                            "net.ipv4.no_such_key_gx"}
    before = ns.sysctl("net.ipv4.tcp_mtu_probing")
    p = subprocess.run(["ip", "netns", "exec", ns.name, "sysctl", "-p", str(top)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "no_such_key_gx" in p.stderr
    assert ns.sysctl("net.ipv4.tcp_mtu_probing") == before       # the include was not followed


def _host_value(key: str) -> str:
    return subprocess.run(["sysctl", "-n", key], capture_output=True, text=True,
                          timeout=30).stdout.strip()


@pytest.mark.parametrize("path", BUNDLED, ids=[p.stem for p in BUNDLED])
def test_sysctl_dry_run_reads_every_line_as_the_loader_does(host_sysctl_lock, path):
    """`sysctl --dry-run -p FILE` on the host: the whole file, global keys included, parsed
    and checked by procps without writing (the host's values are compared before and after).
    A key this kernel does not have may only be a compiled-out kernel.* one."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    if "--dry-run" not in subprocess.run(["sysctl", "--help"], capture_output=True,
                                         text=True).stdout:
        pytest.skip("this procps has no --dry-run")
    prof = load_profile(str(path))
    present = [s for s in prof.sysctl if os.path.exists(proc_path(s.key))]
    absent = [s.key for s in prof.sysctl if s not in present]
    assert all(not k.startswith("net.") for k in absent), absent
    saved = {s.key: _host_value(s.key) for s in present}
    try:
        p = subprocess.run(["sysctl", "--dry-run", "-p", str(path)], capture_output=True,
                           text=True, timeout=60)
    finally:
        now = {k: _host_value(k) for k in saved}
        for key in (k for k in saved if now[k] != saved[k]):      # never expected: restore
            subprocess.run(["sysctl", "-q", "-w", f"{key}={saved[key]}"], timeout=30)
    assert now == saved, "sysctl --dry-run wrote to the host"
    printed = [tuple(line.split(" = ", 1)) for line in p.stdout.splitlines()]
    assert [(k, " ".join(v.split())) for k, v in printed] == [(s.key, s.value) for s in present]
    errors = p.stderr.splitlines()
    assert len(errors) == len(absent), p.stderr
    pairs = zip(absent, errors, strict=True)
    assert all(f"cannot stat {proc_path(k)}" in e for k, e in pairs), p.stderr
    assert p.returncode == (1 if absent else 0)
