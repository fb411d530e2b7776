"""known_hosts read like OpenSSH: checked against ssh-keygen -F on real key files."""
from __future__ import annotations

import base64
import shutil
import subprocess

import pytest

from gridxfer.tuning.targets import known_hosts as kh

pytestmark = pytest.mark.skipif(not shutil.which("ssh-keygen"), reason="needs ssh-keygen")


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("keys")
    out = {}
    for name, kind in [("a", "ed25519"), ("b", "ed25519"), ("r", "rsa")]:
        subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(d / name)], check=True)
        t, b64 = (d / f"{name}.pub").read_text().split()[:2]
        out[name] = (t, base64.b64decode(b64), b64)
    return out


def keygen_finds(path, name):
    return subprocess.run(["ssh-keygen", "-F", name, "-f", str(path)], capture_output=True,
                          text=True).returncode == 0


def test_patterns_and_hashes_match_as_ssh_keygen_says(tmp_path, keys):
    t, blob, b64 = keys["a"]
    path = tmp_path / "known_hosts"
    lines = [f"*.grid.example,!bad.grid.example {t} {b64}", f"[se0?.site]:2222 {t} {b64}",
             f"{kh.hash_name('hashed.site')} {t} {b64}", f"Plain.Site {t} {b64}"]
    path.write_text("\n".join(lines) + "\n")
    entries = kh.load(path)
    for name in ["dtn.grid.example", "bad.grid.example", "[se01.site]:2222", "se01.site",
                 "[se01.site]:22", "hashed.site", "other.site", "plain.site"]:
        ours = any(e.names(name) for e in entries)
        assert ours == keygen_finds(path, name), name


def test_markers_comments_and_unknown_types_are_handled(tmp_path, keys):
    (t, blob, b64), (_, other, other64) = keys["a"], keys["b"]
    path = tmp_path / "known_hosts"
    path.write_text(f"# comment\n\n   \n@cert-authority *.site {t} {other64} ca\n"
                    f"@revoked * {t} {other64}\nhost.site ssh-future AAAAB3NzaC1yc2EAAAADAQAB\n"
                    f"host.site {t} not-base64!\n@weird host.site {t} {b64}\nhost.site {t} {b64}\n")
    entries = kh.load(path)
    assert kh.check(entries, "host.site", t, blob).status == kh.KNOWN
    revoked = kh.check(entries, "host.site", t, other)
    assert revoked.status == kh.REVOKED_KEY and revoked.entry.line == 5
    unknown = kh.check(entries, "new.site", t, blob)
    assert unknown.status == kh.UNKNOWN and [e.line for e in unknown.ca] == [4]
    path.write_text(f"host.site {t} {other64}\n")
    changed = kh.check(kh.load(path), "host.site", t, blob)
    assert changed.status == kh.CHANGED and changed.entry.line == 1
    rt, rblob, r64 = keys["r"]
    assert kh.check(kh.load(path), "host.site", rt, rblob).status == kh.UNKNOWN   # other type
    assert kh.known_types(kh.load(path), "host.site") == [t]


@pytest.mark.parametrize("hashed", [False, True])
def test_append_keeps_every_byte(tmp_path, keys, hashed):
    t, blob, b64 = keys["a"]
    path = tmp_path / "known_hosts"
    original = b"# managed by puppet\n\nold.site ssh-future AAAA\xff comment\n@cert-authority * x y"
    path.write_bytes(original)
    kh.append(path, "[new.site]:2222", t, blob, hashed=hashed)
    data = path.read_bytes()
    assert data.startswith(original + b"\n") and data.count(b"\n") == original.count(b"\n") + 2
    assert keygen_finds(path, "[new.site]:2222")
    assert (b"new.site" in data) is not hashed
    assert kh.check(kh.load(path), "[new.site]:2222", t, blob).status == kh.KNOWN
