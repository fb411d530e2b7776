"""`gridxfer copy` on the real local grid (xrootd, GSI globus-gridftp-server): uploads,
downloads and third-party copies through the campaign's movers and integrity path, with
gfal-copy's and xrdcp's habits (directory destination, -f, -p, -K, --dry-run, --tpc)."""
from __future__ import annotations

import os
import zlib

import pytest

from gridxfer.cli.main import main
from gridxfer.testbed.localgrid import put_local

pytestmark = pytest.mark.integration


def _adler(data: bytes) -> str:
    return f"{zlib.adler32(data):08x}"


@pytest.fixture
def payload(tmp_path):
    data = os.urandom(3 << 20)
    path = tmp_path / "run 1.dat"           # a space: carried as the file it is
    path.write_bytes(data)
    return path, data


def _dir_of(inv, endpoint: str, sub: str):
    return inv.local_path(inv.resolve(f"{endpoint}/{sub}"))


def _leftovers(directory) -> list[str]:
    return [n for n in os.listdir(directory) if ".gxpart-" in n] if directory.exists() else []


@pytest.mark.parametrize("endpoint", ["t1a-xrd1", "t1a-gsiftp", "t1a-davs1"])
def test_upload_by_endpoint_name_into_a_directory(local_grid, local_grid_home, payload,
                                                  capsys, endpoint):
    path, data = payload
    sub = f"copy-up-{endpoint}/"
    assert main(["copy", "-p", "2", str(path), f"{endpoint}/{sub}"]) == 0
    out = capsys.readouterr().out
    assert _adler(data) in out and "copied" in out
    landed = _dir_of(local_grid, endpoint, sub) / path.name
    assert landed.read_bytes() == data
    assert not _leftovers(landed.parent)


def test_an_existing_destination_needs_force(local_grid, local_grid_home, tmp_path, capsys):
    old = put_local(local_grid, "t1a-xrd2", "copy-f/x.dat", b"old contents")
    new = tmp_path / "x.dat"
    new.write_bytes(os.urandom(70_000))
    assert main(["copy", str(new), old]) == 1
    err = capsys.readouterr().err
    assert "exists" in err and "-f" in err and len(err.strip().splitlines()) == 1
    assert local_grid.local_path(old).read_bytes() == b"old contents"
    assert main(["copy", "-f", str(new), old]) == 0
    assert local_grid.local_path(old).read_bytes() == new.read_bytes()


def test_a_checksum_that_does_not_match_leaves_nothing(local_grid, local_grid_home, payload,
                                                       capsys):
    path, data = payload
    wrong = f"{(zlib.adler32(data) + 1) & 0xFFFFFFFF:08x}"
    dst = local_grid.endpoints["t1b-xrd"].url + "copy-k/bad.dat"
    assert main(["copy", "-K", f"ADLER32:{wrong}", str(path), dst]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gridxfer: error: checksum:") and wrong in err
    where = local_grid.local_path(dst)
    assert not where.exists() and not _leftovers(where.parent)
    assert main(["copy", "-K", f"adler32:{_adler(data)}", str(path), dst]) == 0
    assert where.read_bytes() == data


def test_download_with_streams_and_third_party_copy(local_grid, local_grid_home, tmp_path,
                                                    capsys):
    data = os.urandom(5 << 20)
    src = put_local(local_grid, "t0-xrd", "copy-dl/big.dat", data)
    assert main(["copy", "-p", "4", src, str(tmp_path) + "/"]) == 0
    assert (tmp_path / "big.dat").read_bytes() == data
    assert "4 streams" in capsys.readouterr().out
    for habit in (["-n", "3"], ["-S", "3"]):        # gfal-copy's and xrdcp's spellings
        assert main(["copy", "-f", "-s", *habit, src, str(tmp_path / "big.dat")]) == 0
        assert capsys.readouterr().out == ""
    dst = local_grid.endpoints["t1a-xrd1"].url + "copy-tpc/big.dat"
    assert main(["copy", "--tpc", src, dst]) == 0
    assert "xrdcl-tpc" in capsys.readouterr().out
    assert local_grid.local_path(dst).read_bytes() == data


def test_dry_run_copies_nothing_and_fails_where_copy_would(local_grid, local_grid_home,
                                                           payload, capsys):
    path, _ = payload
    dst = local_grid.endpoints["t1a-xrd1"].url + "copy-dry/a.dat"
    assert main(["copy", "--dry-run", str(path), dst]) == 0
    assert "would copy" in capsys.readouterr().out
    assert not local_grid.local_path(dst).exists()
    existing = put_local(local_grid, "t1a-xrd1", "copy-dry/b.dat", b"x")
    assert main(["copy", "--dry-run", str(path), existing]) == 1
    assert "exists" in capsys.readouterr().err
    missing = local_grid.endpoints["t0-xrd"].url + "copy-dry/none.dat"
    assert main(["copy", "--dry-run", missing, str(path) + ".back"]) == 1
    assert "source_missing" in capsys.readouterr().err


def test_several_sources_and_partial_failure(local_grid, local_grid_home, tmp_path, capsys):
    a, b = tmp_path / "a.dat", tmp_path / "b.dat"
    a.write_bytes(b"a" * 1000)
    b.write_bytes(b"b" * 1000)
    put_local(local_grid, "t1b-xrd", "copy-many/b.dat", b"already")
    dst = local_grid.endpoints["t1b-xrd"].url + "copy-many/"
    assert main(["copy", str(a), str(b), dst]) == 3
    cap = capsys.readouterr()
    assert "a.dat" in cap.out and "exists" in cap.err and "1 of 2 copies failed" in cap.err
    assert (local_grid.local_path(dst) / "a.dat").read_bytes() == b"a" * 1000


@pytest.mark.parametrize("argv,needle", [
    (["copy", "/etc/hostname", "root://bob:s3cret@127.0.0.1:1/x"], "password"),
    (["copy", "-p", "0", "/etc/hostname", "/tmp/x"], "below 1"),
    (["copy", "-p", "65", "/etc/hostname", "/tmp/x"], "limit 64"),
    (["copy", "-K", "md5", "/etc/hostname", "/tmp/x"], "adler32"),
    (["copy", "/etc/hostname", "/etc/hosts", "/tmp/not-a-dir-gx"], "directory destination"),
    (["copy", "/etc/hostname"], "source and a destination"),
    (["copy", "/etc/hostname", "nosuch://h/x"], "unsupported URL scheme"),
])
def test_bad_input_is_one_line_and_exit_2(gridxfer_home, capsys, argv, needle):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and needle in err and "s3cret" not in err


def test_ctrl_c_leaves_nothing_partial(make_grid, tmp_path):
    """SIGINT during a download from a throttled xrootd: exit 4, and neither the file nor
    its temporary name is left in the destination directory."""
    import signal
    import subprocess
    import sys
    import time
    from gridxfer.testbed.localgrid import ServerSpec
    inv = make_grid([ServerSpec("slow", "xrootd", "T0", throttle=2e6)])
    src = put_local(inv, "slow", "big.dat", os.urandom(40 << 20))      # ~20 s at 2 MB/s
    dst = tmp_path / "out"
    dst.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "gridxfer", "copy", src, str(dst) + "/"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ))
    try:
        deadline = time.monotonic() + 60
        while not any(p.stat().st_size > 0 for p in dst.iterdir()):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 4, (out, err)
    assert "interrupted" in err and "Traceback" not in err
    assert list(dst.iterdir()) == []


def test_davs_trust_with_the_system_ca_file_skipped(local_grid, payload, tmp_path):
    """`gridxfer copy` skips OpenSSL's default CA file where its hashed directory holds the
    same certificates (movers/gfal/systemca.py: davix parses it on every request). The
    grid's CA (X509_CERT_DIR) is still what makes the server trusted: with an empty
    X509_CERT_DIR the same upload is refused and leaves nothing."""
    import subprocess
    import sys
    from gridxfer.movers.gfal import systemca
    if systemca.choice(os.environ) != systemca.NO_FILE:
        pytest.skip("this host's CA directory does not hold its CA file's certificates")
    path, data = payload
    ep = next(e for e in local_grid.endpoints.values() if e.davs_url)
    dst = ep.davs_url + "copy-ca/ok.dat"

    def copy(env: dict[str, str], to: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "gridxfer", "copy", str(path), to],
                              capture_output=True, text=True, env=env, timeout=120)

    done = copy(dict(os.environ), dst)
    assert done.returncode == 0, done.stderr
    assert local_grid.local_path(dst).read_bytes() == data
    (tmp_path / "no-cas").mkdir()
    bad = ep.davs_url + "copy-ca/refused.dat"
    refused = copy({**os.environ, "X509_CERT_DIR": str(tmp_path / "no-cas")}, bad)
    assert refused.returncode == 1, refused.stderr
    assert "not trusted" in refused.stderr and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    where = local_grid.local_path(bad)
    assert not where.exists() and not _leftovers(where.parent)
