"""systemca: OpenSSL's default CA file skipped only where its hashed directory holds every
certificate of it (davix parses that file on every request; movers/gfal/systemca.py)."""
from __future__ import annotations

import os
import shutil
import ssl
import subprocess
from pathlib import Path

import pytest

from gridxfer.movers.gfal import systemca

A = "-----BEGIN CERTIFICATE-----\nQUFB\nQUFB\n-----END CERTIFICATE-----\n"
B = "-----BEGIN CERTIFICATE-----\r\nQkJC QkJC\r\n-----END CERTIFICATE-----\r\n"


def paths(cafile: Path, capath: Path) -> ssl.DefaultVerifyPaths:
    return ssl.DefaultVerifyPaths(str(cafile), str(capath), "SSL_CERT_FILE", str(cafile),
                                  "SSL_CERT_DIR", str(capath))


@pytest.fixture
def store(tmp_path):
    (tmp_path / "certs").mkdir()
    bundle = tmp_path / "bundle.crt"
    bundle.write_text("# header\n" + A + B)
    return bundle, tmp_path / "certs"


def test_certificates_are_compared_by_their_body_whatever_the_spacing():
    assert systemca.certificates(A + B) == {"QUFBQUFB", "QkJCQkJC"}
    assert systemca.certificates("-----BEGIN CERTIFICATE-----\nQUFB") == set()   # cut short


def test_covered_when_every_certificate_has_a_hash_name(store):
    bundle, certs = store
    (certs / "0123abcd.0").write_text(A.replace("\n", "\n\n"))
    assert not systemca.covered(bundle, [certs])            # B missing
    (certs / "b.pem").write_text(B)                         # not a hash name: not looked up
    assert not systemca.covered(bundle, [certs])
    (certs / "89abcdef.1").write_text(B)
    assert systemca.covered(bundle, [certs])


def test_covered_across_several_directories_and_not_for_nothing(store, tmp_path):
    bundle, certs = store
    other = tmp_path / "other"
    other.mkdir()
    (certs / "0123abcd.0").write_text(A)
    (other / "89abcdef.0").write_text(B)
    assert systemca.covered(bundle, [tmp_path / "missing", certs, other])
    assert not systemca.covered(tmp_path / "no-such.crt", [certs, other])
    empty = tmp_path / "empty.crt"
    empty.write_text("")
    assert not systemca.covered(empty, [certs, other])      # nothing to save


def test_choice_reads_the_files_openssl_would_use(store, tmp_path):
    bundle, certs = store
    (certs / "0123abcd.0").write_text(A)
    (certs / "89abcdef.0").write_text(B)
    defaults = paths(tmp_path / "none.crt", tmp_path / "none")
    assert systemca.choice({}, defaults) is None            # the built-in file is missing
    env = {"SSL_CERT_FILE": str(bundle), "SSL_CERT_DIR": f"{tmp_path / 'none'}:{certs}"}
    assert systemca.choice(env, defaults) == systemca.NO_FILE
    assert systemca.choice({}, paths(bundle, certs)) == systemca.NO_FILE
    assert systemca.choice({"SSL_CERT_DIR": str(tmp_path)}, paths(bundle, certs)) is None
    assert systemca.choice({"SSL_CERT_FILE": systemca.NO_FILE}, paths(bundle, certs)) is None


def test_apply_sets_the_variable_for_this_process_and_its_children(store, monkeypatch):
    bundle, certs = store
    (certs / "0123abcd.0").write_text(A)
    (certs / "89abcdef.0").write_text(B)
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    monkeypatch.setenv("SSL_CERT_DIR", str(certs))
    assert systemca.apply() == systemca.NO_FILE
    assert os.environ["SSL_CERT_FILE"] == systemca.NO_FILE
    assert systemca.apply() is None                         # once
    (certs / "89abcdef.0").unlink()
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    assert systemca.apply() is None
    assert os.environ["SSL_CERT_FILE"] == str(bundle)


def _verify(pems: list[Path], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["openssl", "verify", "-partial_chain", "-no_check_time",
                           *map(str, pems)], env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.skipif(not shutil.which("openssl"), reason="needs the openssl program")
def test_this_hosts_trust_is_unchanged_without_the_file(tmp_path):
    """Every certificate of this host's default CA file still verifies through OpenSSL's
    default store once systemca skips the file; with the directory emptied too, none does
    (the check can fail)."""
    env = {k: v for k, v in os.environ.items() if k != "OPENSSL_CONF"}
    if systemca.choice(env) != systemca.NO_FILE:
        pytest.skip("this host's CA directory does not hold its CA file's certificates")
    defaults = ssl.get_default_verify_paths()
    cafile = env.get("SSL_CERT_FILE") or defaults.openssl_cafile
    bodies = sorted(systemca.certificates(Path(cafile).read_text(errors="replace")))
    pems = []
    for i, body in enumerate(bodies):
        lines = "\n".join(body[j:j + 64] for j in range(0, len(body), 64))
        pems.append(tmp_path / f"c{i}.pem")
        pems[-1].write_text(f"-----BEGIN CERTIFICATE-----\n{lines}\n-----END CERTIFICATE-----\n")
    skipped = {**env, "SSL_CERT_FILE": systemca.NO_FILE}
    done = _verify(pems, skipped)
    assert done.returncode == 0 and done.stdout.count(": OK") == len(pems), done.stderr[-500:]
    (tmp_path / "empty").mkdir()
    refused = _verify(pems[:3], {**skipped, "SSL_CERT_DIR": str(tmp_path / "empty")})
    assert refused.returncode != 0
