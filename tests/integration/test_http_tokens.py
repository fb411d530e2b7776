"""davs://, HTTP-TPC, WLCG tokens, ztn and GSI on the testbed's real XRootD 5.5.3 servers.

Clients are the real ones: gfal-copy / gfal-sum (gfal2's http plugin, davix), xrdcp
(root://, roots://, and https:// through the XrdCl HTTP plugin) and curl for the raw
WebDAV COPY and Want-Digest requests. A token never goes into a process's arguments:
gfal2 and xrdcp read it from the environment, curl from a header file (``-H @file``).
"""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from gridxfer.testbed import localgrid
from gridxfer.testbed import tokens as tok_mod
from gridxfer.testbed.localgrid import AUTH_SERVERS, LocalGridSpec, ServerSpec

pytestmark = pytest.mark.integration

SERVERS = (ServerSpec("h-xrd", "xrootd", "T0"), ServerSpec("h-slow", "xrootd", "T0", throttle=2e6),
           *AUTH_SERVERS)
DATA = os.urandom(300_000) + b"\0" * 50_000


def adler32(data: bytes) -> str:
    return f"{zlib.adler32(data) & 0xFFFFFFFF:08x}"


@pytest.fixture(scope="module")
def grid(tmp_path_factory, grid_ca):
    """An anonymous xrootd, two token servers and a GSI server, up for this module."""
    home = tmp_path_factory.mktemp("http-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GRIDXFER_HOME", str(home))
        inv = localgrid.up(LocalGridSpec(servers=SERVERS, gsi=grid_ca, owner_pid=os.getpid()))
        try:
            yield dataclasses.replace(inv, extra={**inv.extra, "home": str(home)})
        finally:
            localgrid.down()


@pytest.fixture(scope="module")
def issuer(grid):
    return tok_mod.load_issuer(Path(grid.extra["issuer"]))


@pytest.fixture(scope="module")
def payload(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("payload") / "payload.dat"
    path.write_bytes(DATA)
    return path


def token(issuer, *scopes: str) -> str:
    return tok_mod.mint(issuer, list(scopes), lifetime=600)


def run(argv, env, timeout=60) -> subprocess.CompletedProcess:
    """Run a client; Debian's gfal-copy sometimes aborts at exit (SIGABRT) after a
    complete copy under load: retry that, a few times only."""
    for _ in range(3):
        res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
        if not (argv[0].startswith("gfal") and res.returncode < 0):
            break
    return res


def client_env(grid, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("BEARER_TOKEN", "BEARER_TOKEN_FILE", "XDG_RUNTIME_DIR")}
    return {**env, **grid.client_env(), **extra}


def curl(grid, tmp_path, method: str, url: str, headers: dict[str, str], *extra: str):
    """curl with the headers in a 0600 file (tokens stay out of argv); -> (status, body, head)."""
    hdr = tmp_path / f"headers-{os.urandom(4).hex()}"
    hdr.touch(mode=0o600)
    hdr.write_text("".join(f"{k}: {v}\n" for k, v in headers.items()))
    head = tmp_path / f"head-{os.urandom(4).hex()}"
    # a body goes out only after the server's 100 Continue: sent at once (curl does that
    # below 1 MB), a refused upload raced the server's 403 and close, and curl got a
    # connection reset and no status (000) now and then under load
    expect = ["-H", "Expect: 100-continue"] if "--data-binary" in extra else []
    res = subprocess.run(["curl", "-sS", "--capath", grid.client_env()["X509_CERT_DIR"],
                          "-X", method, "-H", f"@{hdr}", *expect, "-D", str(head), "-o", "-",
                          "-w", "\n%{http_code}", *extra, url],
                         capture_output=True, text=True, timeout=60)
    body, _, code = res.stdout.rpartition("\n")
    assert code.isdigit() and code != "000", f"curl {method}: no HTTP status: {res.stderr}"
    return int(code), body, head.read_text() if head.exists() else ""


def disk(grid, name: str, rel: str) -> Path:
    return Path(grid.endpoints[name].data_dir) / rel


# --- the inventory ------------------------------------------------------------------------

def test_inventory_records_davs_urls_and_auth_modes(grid):
    ep = grid.endpoints
    assert ep["h-xrd"].url.startswith("root://") and ep["h-xrd"].davs_url.startswith("davs://")
    assert (ep["h-xrd"].auth, ep["h-xrd"].davs_auth, ep["h-xrd"].davs_name) == ("none",
                                                                                "none", "h-davs")
    assert (ep["t2-tok1"].auth, ep["t2-tok1"].davs_auth, ep["t2-tok1"].token_base) == (
        "ztn",
        "token",
        "/data",
    )
    assert ep["t2-gsi"].url.startswith("roots://localhost:") and ep["t2-gsi"].auth == "gsi"
    assert grid.resolve("t2-davs1/a/b") == ep["t2-tok1"].davs_url + "a/b"
    assert grid.local_path(grid.resolve("t2-davs2/x")) == disk(grid, "t2-tok2", "x")


# --- davs:// with gfal2 (davix) -----------------------------------------------------------

def test_davs_upload_download_with_scoped_token(grid, issuer, payload, tmp_path):
    """gfal-copy stats the destination before it writes: it needs storage.read there too."""
    url = grid.resolve("t2-davs1/gfal/up.dat")
    env = client_env(grid, BEARER_TOKEN=token(issuer, "storage.create:/gfal"))
    res = run(["gfal-copy", str(payload), url], env)
    assert res.returncode != 0 and "HTTP 403" in res.stderr
    env = client_env(grid, BEARER_TOKEN=token(issuer, "storage.read:/gfal", "storage.create:/gfal"))
    res = run(["gfal-copy", str(payload), url], env)
    assert res.returncode == 0, res.stderr
    assert disk(grid, "t2-tok1", "gfal/up.dat").read_bytes() == DATA
    env = client_env(grid, BEARER_TOKEN=token(issuer, "storage.read:/gfal"))
    back = tmp_path / "back.dat"
    res = run(["gfal-copy", url, f"file://{back}"], env)
    assert res.returncode == 0, res.stderr
    assert back.read_bytes() == DATA
    res = run(["gfal-sum", url, "adler32"], env)
    assert res.returncode == 0 and res.stdout.split()[-1] == adler32(DATA), res.stdout + res.stderr


def test_davs_anonymous_endpoint_takes_an_x509_proxy(grid, payload, tmp_path):
    url = grid.resolve("h-davs/anon/up.dat")
    res = run(["gfal-copy", "-f", str(payload), url], client_env(grid))
    assert res.returncode == 0, res.stderr
    assert disk(grid, "h-xrd", "anon/up.dat").read_bytes() == DATA


@pytest.mark.parametrize("scopes", [("storage.read:/",), ()], ids=["read-only", "no-token"])
def test_writing_without_a_write_scope_is_refused_with_403(grid, issuer, payload, tmp_path, scopes):
    url = grid.resolve("t2-davs1/refused/f.dat")
    extra = {"BEARER_TOKEN": token(issuer, *scopes)} if scopes else {}
    res = run(["gfal-copy", str(payload), url], client_env(grid, **extra))
    assert res.returncode != 0 and "HTTP 403" in res.stderr, res.stderr
    assert not disk(grid, "t2-tok1", "refused/f.dat").exists()
    auth = {"Authorization": f"Bearer {token(issuer, *scopes)}"} if scopes else {}
    code, _, _ = curl(grid, tmp_path, "PUT", url.replace("davs://", "https://"), auth,
                      "--data-binary", f"@{payload}")
    assert code == 403


def test_create_scope_makes_new_files_but_does_not_overwrite(grid, issuer, payload, tmp_path):
    """storage.create is XRootD's exclusive create: a new file (and its parent directories)
    is allowed, overwriting or deleting it needs storage.modify."""
    url = grid.resolve("t2-davs1/create/new/f.dat").replace("davs://", "https://")
    create = {"Authorization": f"Bearer {token(issuer, 'storage.create:/create')}"}
    put = ("--data-binary", f"@{payload}")
    assert curl(grid, tmp_path, "PUT", url, create, *put)[0] in (200, 201)
    assert curl(grid, tmp_path, "PUT", url, create, *put)[0] == 403
    assert curl(grid, tmp_path, "DELETE", url, create)[0] == 403
    modify = {"Authorization": f"Bearer {token(issuer, 'storage.modify:/create')}"}
    assert curl(grid, tmp_path, "PUT", url, modify, *put)[0] in (200, 201)
    outside = {"Authorization": f"Bearer {token(issuer, 'storage.modify:/elsewhere')}"}
    assert curl(grid, tmp_path, "PUT", url, outside, *put)[0] == 403


def test_want_digest_adler32_is_the_servers_zero_padded_checksum(grid, issuer, tmp_path):
    """XrdHttp answers ``Want-Digest: adler32`` with the header ``Digest: adler32=<8 hex>``
    (lower case, zero-padded; a HEAD request is enough)."""
    data = b"x"         # adler32 0x00790079: has leading zeros
    localgrid.put_local(grid, "t2-tok1", "digest/one", data)
    url = grid.resolve("t2-davs1/digest/one").replace("davs://", "https://")
    headers = {"Authorization": f"Bearer {token(issuer, 'storage.read:/digest')}",
               "Want-Digest": "adler32"}
    code, _, head = curl(grid, tmp_path, "HEAD", url, headers, "-I")
    assert code == 200, head
    digest = [line.strip() for line in head.splitlines() if line.lower().startswith("digest:")]
    assert digest == [f"Digest: adler32={adler32(data)}"] and adler32(data) == "00790079"


# --- HTTP third-party copy ----------------------------------------------------------------

@pytest.mark.parametrize("mode", ["pull", "push"])
def test_http_tpc_with_a_token_per_side(grid, issuer, mode, tmp_path):
    """Pull: COPY to the destination with Source:; push: COPY to the source with
    Destination:. The active side's token goes in Authorization, the remote side's in
    TransferHeaderAuthorization (the active server forwards it as Authorization).
    XRootD 5.5.3 pulls only into an existing directory (push creates it: a PUT has mkpath)."""
    localgrid.put_local(grid, "t2-tok1", f"tpc/{mode}.src", DATA)
    src = grid.resolve(f"t2-davs1/tpc/{mode}.src").replace("davs://", "https://")
    dst = grid.resolve(f"t2-davs2/tpc/{mode}/{mode}.dst").replace("davs://", "https://")
    src_tok, dst_tok = token(issuer, "storage.read:/tpc"), token(issuer, "storage.create:/tpc")
    if mode == "pull":
        auth = {"Authorization": f"Bearer {dst_tok}"}
        assert curl(grid, tmp_path, "MKCOL", dst.rsplit("/", 1)[0], auth)[0] == 201
    if mode == "pull":
        target, hdrs = dst, {"Source": src, "Authorization": f"Bearer {dst_tok}",
                             "TransferHeaderAuthorization": f"Bearer {src_tok}"}
    else:
        target, hdrs = src, {"Destination": dst, "Authorization": f"Bearer {src_tok}",
                             "TransferHeaderAuthorization": f"Bearer {dst_tok}"}
    code, body, _ = curl(grid, tmp_path, "COPY", target, hdrs)
    assert code == 201 and "success" in body, body
    assert disk(grid, "t2-tok2", f"tpc/{mode}/{mode}.dst").read_bytes() == DATA
    # the remote side without its token: the copy fails and leaves no file
    del hdrs["TransferHeaderAuthorization"]
    if mode == "pull":
        target = dst + ".2"
    else:
        hdrs["Destination"] = dst + ".2"
    # (the status line is sent before the copy starts: 201, then "failure: ..." in the body)
    code, body, _ = curl(grid, tmp_path, "COPY", target, hdrs)
    assert code == 201 and "failure: Remote side failed with status code 403" in body, body
    # XRootD 5.5.3 leaves an empty destination file behind after a failed pull: the
    # mover has to delete it. Nothing else may be left.
    left = disk(grid, "t2-tok2", f"tpc/{mode}/{mode}.dst.2")
    assert not left.exists() or left.stat().st_size == 0


def test_tpc_sends_performance_markers_while_it_copies(grid, issuer, tmp_path):
    """XrdHttpTPC 5.5.3 sends a marker when the copy starts and then every 5 s (fixed):
    a 30 MB pull from a server throttled to 2 MB/s shows bytes in flight."""
    size = 30 << 20
    localgrid.put_local(grid, "h-slow", "slow/big", os.urandom(1 << 20) * 30)
    src = grid.resolve("h-slow-davs/slow/big").replace("davs://", "https://")
    dst = grid.resolve("t2-davs2/markers.dat").replace("davs://", "https://")
    code, body, _ = curl(grid, tmp_path, "COPY", dst,
                         {"Source": src,
                          "Authorization": f"Bearer {token(issuer, 'storage.create:/')}"})
    assert code == 201 and body.rstrip().endswith("success: Created"), body[-300:]
    done = [int(line.split(":")[1]) for line in body.splitlines()
            if line.startswith("Stripe Bytes Transferred:")]
    assert body.count("Perf Marker") >= 2 and any(0 < n < size for n in done), body
    assert disk(grid, "t2-tok2", "markers.dat").stat().st_size == size


def test_roots_to_an_anonymous_server_is_tls_only(grid, payload, tmp_path):
    url = grid.resolve("h-xrd/tls/f.dat").replace("root://", "roots://", 1)
    res = run(["xrdcp", "-s", str(payload), url], client_env(grid))
    assert res.returncode == 0, res.stderr
    assert disk(grid, "h-xrd", "tls/f.dat").read_bytes() == DATA


@pytest.mark.parametrize("mode", ["pull", "push"])
def test_gfal_copy_tpc_modes(grid, issuer, mode):
    """gfal-copy --copy-mode pull/push between two token endpoints (BEARER_TOKEN holds a
    token good for both sides: gfal-copy has one token for all URLs); -p makes the
    destination's directory (MKCOL), which a pull needs."""
    localgrid.put_local(grid, "t2-tok1", f"gtpc/{mode}.src", DATA)
    src, dst = grid.resolve(f"t2-davs1/gtpc/{mode}.src"), grid.resolve(f"t2-davs2/gtpc/{mode}.dst")
    env = client_env(grid, BEARER_TOKEN=token(issuer, "storage.read:/gtpc", "storage.create:/gtpc"))
    res = run(["gfal-copy", "-v", "-p", "--copy-mode", mode, src, dst], env, timeout=120)
    assert res.returncode == 0, res.stderr[-800:]
    assert f"TRANSFER:TYPE\t3rd {mode}" in res.stdout + res.stderr
    assert disk(grid, "t2-tok2", f"gtpc/{mode}.dst").read_bytes() == DATA


GFAL_PER_SIDE = """
import sys, gfal2
src, dst, mode = sys.argv[1:4]
ctx = gfal2.creat_context()
# a credential applies to a URL and everything below it as a directory
ctx.cred_set(src, ctx.cred_new("BEARER", sys.stdin.readline().strip()))
ctx.cred_set(dst, ctx.cred_new("BEARER", sys.stdin.readline().strip()))
ctx.set_opt_string("HTTP PLUGIN", "DEFAULT_COPY_MODE", "3rd " + mode)
ctx.set_opt_boolean("HTTP PLUGIN", "ENABLE_STREAM_COPY", False)
ctx.filecopy(ctx.transfer_parameters(), src, dst)
"""


@pytest.mark.parametrize("mode", ["pull", "push"])
def test_gfal2_tpc_with_a_token_per_url(grid, issuer, mode):
    localgrid.put_local(grid, "t2-tok1", f"ptpc/{mode}.src", DATA)
    """gfal2 keeps a credential per URL prefix (cred_set): a token per side. gfal2 stats the
    destination first, so its token needs storage.read too."""
    src, dst = grid.resolve(f"t2-davs1/ptpc/{mode}.src"), grid.resolve(f"t2-davs2/ptpc/{mode}.dst")
    localgrid.put_local(grid, "t2-tok2", "ptpc/.keep", b"")      # a pull needs the directory
    dst_tok = token(issuer, "storage.read:/ptpc", "storage.create:/ptpc")
    tokens = f"{token(issuer, 'storage.read:/ptpc')}\n{dst_tok}\n"
    res = subprocess.run(["/usr/bin/python3", "-c", GFAL_PER_SIDE, src, dst, mode], input=tokens,
                         capture_output=True, text=True, timeout=120, env=client_env(grid))
    assert res.returncode == 0, res.stderr[-800:]
    assert disk(grid, "t2-tok2", f"ptpc/{mode}.dst").read_bytes() == DATA


# --- root:// with ztn, roots:// with GSI, https:// with xrdcp --------------------------------

def test_root_with_a_ztn_token(grid, issuer, payload, tmp_path):
    url = grid.resolve("t2-tok1/ztn/f.dat")
    tok_file = tmp_path / "bt"
    tok_file.touch(mode=0o600)
    tok_file.write_text(token(issuer, "storage.create:/ztn", "storage.read:/ztn") + "\n")
    res = run(["xrdcp", "-s", str(payload), url], client_env(grid, BEARER_TOKEN_FILE=str(tok_file)))
    assert res.returncode == 0, res.stderr
    assert disk(grid, "t2-tok1", "ztn/f.dat").read_bytes() == DATA
    back = tmp_path / "back"
    res = run(["xrdcp", "-s", url, str(back)], client_env(grid, BEARER_TOKEN_FILE=str(tok_file)))
    assert res.returncode == 0 and back.read_bytes() == DATA, res.stderr
    res = run(["xrdcp", "-s", str(payload), url + ".2"], client_env(grid))
    assert res.returncode != 0 and "Auth failed" in res.stderr
    res = run(["xrdcp", "-s", str(payload), url + ".3"],
              client_env(grid, BEARER_TOKEN=token(issuer, "storage.read:/")))
    assert res.returncode != 0 and "permission denied" in res.stderr.lower()


def test_roots_with_gsi(grid, payload, tmp_path):
    url = grid.resolve("t2-gsi/gsi/f.dat")
    assert url.startswith("roots://")
    res = run(["xrdcp", "-s", str(payload), url], client_env(grid))
    assert res.returncode == 0, res.stderr
    assert disk(grid, "t2-gsi", "gsi/f.dat").read_bytes() == DATA
    res = run(["xrdcp", "-s", url, str(tmp_path / "back")], client_env(grid))
    assert res.returncode == 0 and (tmp_path / "back").read_bytes() == DATA
    res = run(["xrdcp", "-s", str(payload), url + ".2"],
              client_env(grid, X509_USER_PROXY=str(tmp_path / "no-proxy")))
    assert res.returncode != 0 and not disk(grid, "t2-gsi", "gsi/f.dat.2").exists()


def test_xrdcp_https_through_the_xrdcl_http_plugin(grid, payload, tmp_path):
    url = grid.resolve("h-davs/xrdcl/f.dat").replace("davs://", "https://")
    res = run(["xrdcp", "--allow-http", "-s", str(payload), url], client_env(grid))
    assert res.returncode == 0, res.stderr
    res = run(["xrdcp", "--allow-http", "-s", url, str(tmp_path / "back")], client_env(grid))
    assert res.returncode == 0 and (tmp_path / "back").read_bytes() == DATA


# --- the CLI: `testbed token` and `testbed env` against the real servers ----------------------

def test_cli_token_and_env_work_with_gfal_and_xrdcp(grid, payload, tmp_path):
    env = {**client_env(grid), "GRIDXFER_HOME": grid.extra["home"]}
    gx = [sys.executable, "-m", "gridxfer", "testbed"]
    res = subprocess.run(
        [
            *gx,
            "token",
            "--scope",
            "storage.read:/cli",
            "--scope",
            "storage.create:/cli",
            "--lifetime",
            "5m",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    url = grid.resolve("t2-davs1/cli/by-token.dat")
    res = run(["gfal-copy", str(payload), url], {**env, "BEARER_TOKEN": res.stdout.strip()})
    assert res.returncode == 0, res.stderr
    # eval "$(gridxfer testbed env)": X.509 for roots://, the token file for ztn and gfal2
    out = subprocess.run([*gx, "env"], capture_output=True, text=True, env=env, timeout=60).stdout
    assert "eyJ" not in out
    script = (f'eval "$1"; gfal-copy "{payload}" "{grid.resolve("t2-davs2/cli/env.dat")}" && '
              f'xrdcp -s "{payload}" "{grid.resolve("t2-tok2/cli/ztn.dat")}" && '
              f'xrdcp -s "{payload}" "{grid.resolve("t2-gsi/cli/gsi.dat")}"')
    clean = {k: v for k, v in env.items() if not k.startswith(("X509_", "BEARER_"))}
    res = subprocess.run(["bash", "-c", script, "bash", out], capture_output=True, text=True,
                         env=clean, timeout=120)
    assert res.returncode == 0, res.stderr[-800:]
    for name, rel in (("t2-tok2", "cli/env.dat"), ("t2-tok2", "cli/ztn.dat"),
                      ("t2-gsi", "cli/gsi.dat")):
        assert disk(grid, name, rel).read_bytes() == DATA
