"""Campaigns with bearer tokens on real XRootD 5.5.3 servers with ztn and the SciTokens
plugin (the testbed's t2-tok1: root:// needs a WLCG token, and so does its XrdHttp,
davs:// t2-davs1; scopes relative to /data). Each case runs over root:// and davs://.

Each campaign runs as `gridxfer campaign run` in a child process, its token in a 0600 file
named in the campaign file. Right scopes succeed; a read-only token and no token fail
every file as `auth`, none of it written; an expiring token pauses the tier until the file
is refreshed, without a failed file; and the token's signature appears in no output,
log, journal or state file, and in no process's arguments or environment."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gridxfer.testbed import localgrid
from gridxfer.testbed import tokens as tok_mod

pytestmark = pytest.mark.integration

FILES = {f"f{i}.dat": os.urandom(200_000 + i) for i in range(4)}
# endpoint names of one server (its data in t2-tok1's directory): root:// with ztn, davs://
PROTOCOLS = {"root": "t2-tok1", "davs": "t2-davs1"}
CHECKS = Path(__file__).resolve().parents[2] / "checks"


@pytest.fixture(scope="module")
def grid(auth_grid):
    return auth_grid


@pytest.fixture(scope="module")
def issuer(grid):
    return tok_mod.load_issuer(Path(grid.extra["issuer"]))


@pytest.fixture
def source(tmp_path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    for name, data in FILES.items():
        (src / name).write_bytes(data)
    return src


def write_token(path: Path, token: str) -> None:
    tmp = path.with_name(path.name + ".new")
    tmp.touch(mode=0o600)
    tmp.write_text(token + "\n")
    os.replace(tmp, path)


# One request a real XrdHttp 5.5.3 leaves unanswered (CI, session 39: a small file's PUT
# or MOVE, 120 s) is retried instead of failing a campaign's tight retries: after
# GRIDXFER_HTTP_STALL_TIMEOUT (20 s, not 120) it is a timeout, the breaker lets a probe
# through within seconds and the files wait for it, as a site would set it. The token
# tests and test_davs_campaigns' run their campaigns with it.
RIDE_OUT = "circuit_breaker: {cooldown: 2s, max_cooldown: 4s}\non_pool_down: {wait: 2m}\n"
RIDE_OUT_ENV = {"GRIDXFER_HTTP_STALL_TIMEOUT": "20"}


def campaign_file(tmp_path: Path, name: str, src: Path, dst: str, token: str | None) -> Path:
    tok = f"\n    token: {{file: {token}, base: /data}}" if token else ""
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"""campaign: {name}
source: {{url: "file://{src}/", files: {{glob: "*.dat"}}}}
destinations:
  - tier: T2
    pool: ["{dst}"]
    max_active: 2{tok}
retries: {{max: 2, backoff: 1s}}
{RIDE_OUT}""")
    return path


def env_for(grid, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("BEARER_TOKEN", "BEARER_TOKEN_FILE", "XDG_RUNTIME_DIR")}
    env.update(grid.client_env())
    env["GRIDXFER_HOME"] = str(home)
    env.update(RIDE_OUT_ENV)
    env["XDG_RUNTIME_DIR"] = str(home)          # no bt_u<uid> in it: discovery finds none
    env["TMPDIR"] = str(home.parent / "tmp")    # where the ztn login token's directory goes
    os.makedirs(env["TMPDIR"], exist_ok=True)
    return env


def gridxfer(env, *args, timeout=180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gridxfer", *args], capture_output=True,
                          text=True, env=env, timeout=timeout)


def on_disk(grid, rel: str) -> Path:
    return Path(grid.endpoints["t2-tok1"].data_dir) / rel


@pytest.mark.parametrize("proto", sorted(PROTOCOLS))
def test_a_token_with_the_right_scopes_copies_every_file(grid, issuer, source, tmp_path,
                                                         proto):
    """(gfal2 stats a davs destination before it writes: storage.read there too)"""
    tok = tmp_path / "tok"
    d = f"ok-{proto}"
    write_token(tok, tok_mod.mint(issuer, [f"storage.create:/{d}", f"storage.read:/{d}"]))
    spec = campaign_file(tmp_path, d, source, grid.resolve(f"{PROTOCOLS[proto]}/{d}/"),
                         str(tok))
    res = gridxfer(env_for(grid, tmp_path / "home"), "campaign", "run", str(spec), "--quiet")
    assert res.returncode == 0, res.stdout + res.stderr
    for name, data in FILES.items():
        assert on_disk(grid, f"{d}/{name}").read_bytes() == data
    assert list((tmp_path / "tmp").iterdir()) == []     # the login token's directory: gone


@pytest.mark.parametrize("proto", sorted(PROTOCOLS))
@pytest.mark.parametrize("scopes", [("storage.read:/",), None], ids=["read-only", "no-token"])
def test_a_read_only_token_or_none_fails_each_file_as_auth(grid, issuer, source, tmp_path,
                                                           scopes, proto):
    tok = tmp_path / "tok"
    if scopes:
        write_token(tok, tok_mod.mint(issuer, list(scopes)))
    name = f"tok-ro-{proto}" if scopes else f"tok-none-{proto}"
    spec = campaign_file(tmp_path, name, source, grid.resolve(f"{PROTOCOLS[proto]}/{name}/"),
                         str(tok) if scopes else None)
    env = env_for(grid, tmp_path / "home")
    res = gridxfer(env, "campaign", "run", str(spec), "--quiet")
    assert res.returncode == 3, res.stdout + res.stderr
    rep = json.loads(gridxfer(env, "campaign", "report", name, "--json").stdout)
    text = json.dumps(rep)
    assert '"auth"' in text, text[:2000]
    db = sqlite3.connect(tmp_path / "home" / "campaigns" / f"{name}.sqlite")
    rows = db.execute("SELECT state, error_class, attempts, error_msg FROM files").fetchall()
    assert {r[:3] for r in rows} == {("failed", "auth", 1)}, rows   # never retried
    if scopes:
        assert all(f"lacks storage.create:/{name}/" in r[3] for r in rows), rows
    assert not any(on_disk(grid, name).glob("*")) if on_disk(grid, name).exists() else True


@pytest.mark.parametrize("proto", sorted(PROTOCOLS))
def test_an_expiring_token_file_is_refreshed_mid_campaign_without_a_failed_file(
        grid, issuer, source, tmp_path, proto):
    tok = tmp_path / "tok"
    d = f"exp-{proto}"
    scopes = [f"storage.create:/{d}", f"storage.read:/{d}"]
    write_token(tok, tok_mod.mint(issuer, scopes, lifetime=20))  # shorter than a transfer needs
    spec = campaign_file(tmp_path, d, source, grid.resolve(f"{PROTOCOLS[proto]}/{d}/"), str(tok))
    home = tmp_path / "home"
    journal = home / "campaigns" / f"{d}.sqlite"
    refreshed = threading.Event()

    def refresh():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if journal.exists():
                try:
                    db = sqlite3.connect(f"file:{journal}?mode=ro", uri=True)
                    paused = db.execute("SELECT count(*) FROM events WHERE kind='tier_paused'"
                                        ).fetchone()[0]
                    db.close()
                except sqlite3.Error:
                    paused = 0
                if paused:
                    write_token(tok, tok_mod.mint(issuer, scopes, lifetime=3600))
                    refreshed.set()
                    return
            time.sleep(0.1)

    t = threading.Thread(target=refresh, daemon=True)
    t.start()
    res = gridxfer(env_for(grid, home), "campaign", "run", str(spec), "--quiet")
    t.join(5)
    assert refreshed.is_set()
    assert res.returncode == 0, res.stdout + res.stderr
    db = sqlite3.connect(journal)
    assert db.execute("SELECT state, count(*) FROM files GROUP BY state").fetchall() == [
        ("done", len(FILES))]
    assert db.execute("SELECT count(*) FROM attempts WHERE status != 'ok'").fetchone()[0] == 0
    kinds = [r[0] for r in db.execute("SELECT kind FROM events WHERE kind LIKE 'tier_%'")]
    assert kinds == ["tier_paused", "tier_resumed"]
    # one clear line while it waits (stderr), one when it goes on; no failed file
    assert res.stderr.count("tier T2 paused: no usable token for the destination") == 1, res.stderr
    assert "expires in" in res.stderr and "tier T2 resumed" in res.stderr
    for name, data in FILES.items():
        assert on_disk(grid, f"{d}/{name}").read_bytes() == data


def _scan_processes(sig: str, found: list[str], stop: threading.Event) -> None:
    """Every process's arguments and environment, until ``stop``: where ``sig`` shows."""
    while not stop.is_set():
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            for what in ("cmdline", "environ"):
                try:
                    data = Path(f"/proc/{pid}/{what}").read_bytes()
                except OSError:
                    continue
                if sig.encode() in data:
                    found.append(f"{pid}/{what}")
        time.sleep(0.02)


def test_no_token_in_any_output_state_file_argument_or_environment(grid, issuer, source,
                                                                   tmp_path):
    good, ro = tmp_path / "tok", tmp_path / "tok-ro"
    write_token(good, good_tok := tok_mod.mint(issuer, ["storage.modify:/g", "storage.read:/g"]))
    write_token(ro, ro_tok := tok_mod.mint(issuer, ["storage.read:/"]))
    sigs = [good_tok.split(".")[2], ro_tok.split(".")[2]]
    home = tmp_path / "home"
    env = env_for(grid, home)
    found: list[str] = []
    stop = threading.Event()
    scanners = [threading.Thread(target=_scan_processes, args=(s, found, stop), daemon=True)
                for s in sigs]
    for t in scanners:
        t.start()
    outputs = []
    try:
        for name, tok, ep in (("grep-ok", good, "t2-tok1"), ("grep-ro", ro, "t2-tok1"),
                              ("grep-davs", good, "t2-davs1"), ("grep-davs-ro", ro, "t2-davs1")):
            spec = campaign_file(tmp_path, name, source, grid.resolve(f"{ep}/g/{name}/"),
                                 str(tok))
            log = tmp_path / f"{name}.log"
            outputs.append(gridxfer(env, "-vv", "--log-file", str(log), "campaign", "run",
                                    str(spec), "--json"))
            for cmd in (("campaign", "report", name, "--json"),
                        ("campaign", "status", name, "--json"), ("campaign", "report", name),
                        ("campaign", "status", name, "--links")):
                outputs.append(gridxfer(env, *cmd))
            # Nagios status line, perfdata and a Prometheus textfile, per endpoint
            outputs.append(subprocess.run(
                [sys.executable, str(CHECKS / "check_gridxfer_throughput"), "-C", name,
                 "-W", "1h", "--per-endpoint", "-v", "--baseline", "none",
                 "--prom-file", str(home / f"{name}.prom")],
                capture_output=True, text=True, env=env, timeout=60))
    finally:
        stop.set()
        for t in scanners:
            t.join(5)
    assert outputs[0].returncode == 0 and outputs[12].returncode == 0, outputs[12].stderr
    assert "|" in outputs[5].stdout and (home / "grep-ok.prom").exists(), outputs[5]
    for bad in (outputs[6], outputs[18]):
        assert bad.returncode == 3 and "auth" in bad.stdout + bad.stderr
    texts = [o.stdout + o.stderr for o in outputs]
    files = [p for p in (*home.rglob("*"), *tmp_path.glob("*.log")) if p.is_file()]
    assert len([p for p in files if p.suffix == ".sqlite"]) == 4
    assert len([p for p in files if p.suffix == ".prom"]) == 4
    for sig in sigs:
        assert not any(sig in t for t in texts)
        leaked = [str(p) for p in files if sig.encode() in p.read_bytes()]
        assert not leaked, leaked
    assert not found, found


@pytest.mark.parametrize("proto", ["root", "davs-tpc"])
def test_a_token_per_side_from_its_own_file(grid, issuer, tmp_path, proto):
    """The source's token reads only /rsrc-*, the destination's writes only /rdst-*: each
    request carries its own side's token (root://: the ztn login holds one of them only;
    davs -> davs: an HTTP-TPC, the remote side's in TransferHeaderAuthorization)."""
    s_ep, d_ep = ("t2-tok1", "t2-tok2") if proto == "root" else ("t2-davs1", "t2-davs2")
    rs, rd = f"rsrc-{proto}", f"rdst-{proto}"
    for name, data in FILES.items():
        localgrid.put_local(grid, "t2-tok1", f"{rs}/{name}", data)
    localgrid.put_local(grid, "t2-tok2", f"{rd}/.keep", b"")    # an HTTP-TPC pull needs the dir
    src_tok, dst_tok = tmp_path / "src.tok", tmp_path / "dst.tok"
    write_token(src_tok, tok_mod.mint(issuer, [f"storage.read:/{rs}"]))
    write_token(dst_tok, tok_mod.mint(issuer, [f"storage.modify:/{rd}", f"storage.read:/{rd}"]))
    spec = tmp_path / "pair.yaml"
    spec.write_text(f"""campaign: tok-{proto}
source: {{url: "{grid.resolve(f'{s_ep}/{rs}/')}", files: {{glob: "*.dat"}},
          token: {{file: {src_tok}, base: /data}}}}
destinations:
  - tier: T2
    pool: [{{url: "{grid.resolve(f'{d_ep}/{rd}/')}", token: {{file: {dst_tok}, base: /data}}}}]
third_party: {str(proto != "root").lower()}
""")
    res = gridxfer(env_for(grid, tmp_path / "home"), "campaign", "run", str(spec), "--quiet")
    assert res.returncode == 0, res.stdout + res.stderr
    for name, data in FILES.items():
        assert (Path(grid.endpoints["t2-tok2"].data_dir) / rd / name).read_bytes() == data
    db = sqlite3.connect(tmp_path / "home" / "campaigns" / f"tok-{proto}.sqlite")
    modes = {r[0] for r in db.execute("SELECT mode FROM attempts")}
    assert all("tpc" in m for m in modes) if proto != "root" else modes, modes


def test_a_proxy_tier_and_a_token_tier_in_one_campaign(grid, issuer, source, tmp_path):
    """X.509 keeps working beside tokens: roots:// with GSI (the test proxy, as the client
    environment names it) and davs:// with a token file, in one campaign."""
    tok = tmp_path / "tok"
    write_token(tok, tok_mod.mint(issuer, ["storage.modify:/mix", "storage.read:/mix"]))
    spec = tmp_path / "mix.yaml"
    spec.write_text(f"""campaign: tok-mix
source: {{url: "file://{source}/", files: {{glob: "*.dat"}}}}
destinations:
  - tier: GSI
    pool: ["{grid.resolve('t2-gsi/mix/')}"]
  - tier: TOKEN
    pool: ["{grid.resolve('t2-davs1/mix/')}"]
    token: {{file: {tok}, base: /data}}
""")
    assert grid.resolve("t2-gsi/mix/").startswith("roots://")
    res = gridxfer(env_for(grid, tmp_path / "home"), "campaign", "run", str(spec), "--quiet")
    assert res.returncode == 0, res.stdout + res.stderr
    for name, data in FILES.items():
        assert (Path(grid.endpoints["t2-gsi"].data_dir) / "mix" / name).read_bytes() == data
        assert on_disk(grid, f"mix/{name}").read_bytes() == data


@pytest.mark.parametrize("proto", sorted(PROTOCOLS))
def test_resume_removes_a_leftover_temporary_file_on_a_token_server(grid, issuer, source,
                                                                    tmp_path, proto):
    """What a killed run left (a journalled temporary name) is removed by `resume`, with the
    endpoint's token: a token server refuses the clean-up without one."""
    tok = tmp_path / "tok"
    d = f"left-{proto}"
    write_token(tok, tok_mod.mint(issuer, [f"storage.modify:/{d}", f"storage.read:/{d}"]))
    spec = campaign_file(tmp_path, d, source, grid.resolve(f"{PROTOCOLS[proto]}/{d}/"), str(tok))
    env = env_for(grid, tmp_path / "home")
    assert gridxfer(env, "campaign", "run", str(spec), "--quiet").returncode == 0
    localgrid.put_local(grid, "t2-tok1", f"{d}/.f0.dat.gxpart-dead1", b"partial")
    left = grid.resolve(f"{PROTOCOLS[proto]}/{d}/.f0.dat.gxpart-dead1")
    db = sqlite3.connect(tmp_path / "home" / "campaigns" / f"{d}.sqlite")
    with db:
        db.execute("UPDATE attempts SET tmp_url = ? WHERE id = (SELECT min(id) FROM attempts)",
                   (left,))
    db.close()
    res = gridxfer(env, "campaign", "resume", d, "--quiet")
    assert res.returncode == 0, res.stdout + res.stderr
    assert not on_disk(grid, f"{d}/.f0.dat.gxpart-dead1").exists()
