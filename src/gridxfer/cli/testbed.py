"""`gridxfer testbed`: bring up / tear down an embedded grid of real servers.

Local mode (no TOPOLOGY): XRootD + GSI GridFTP + anonymous GridFTP servers on loopback
(:mod:`gridxfer.testbed.localgrid`). With a TOPOLOGY file: tiers in network namespaces
with WAN emulation (:mod:`gridxfer.testbed.netgrid`, imported lazily).
"""
from __future__ import annotations

import importlib
import json
import os
import shlex
import subprocess
from types import ModuleType

import click

from gridxfer import state
from gridxfer.cli import params
from gridxfer.errors import UsageError
from gridxfer.testbed import inventory as inv_mod
from gridxfer.testbed.inventory import Inventory, TestbedError
from gridxfer.limits import MAX_BYTERATE, MAX_DURATION, MAX_SIZE
from gridxfer.units import fmt_bytes, fmt_rate

TOKEN_FILE = "bearer-token"       # $GRIDXFER_HOME/testbed/bearer-token, written by `env`


def _netgrid() -> ModuleType:
    try:
        return importlib.import_module("gridxfer.testbed.netgrid")
    except ImportError as exc:
        raise TestbedError(f"network-namespace testbed is not available ({exc})") from exc


def _mode() -> str | None:
    if not inv_mod.inventory_path().exists():
        return None
    try:
        return inv_mod.load_inventory().mode
    except TestbedError:
        return "local"


@click.group(name="testbed")
def group() -> None:
    """An embedded grid of REAL servers for tests and demos.

    \b
    Without TOPOLOGY, `up` starts on 127.0.0.1 (default grid):
      t0-xrd (root://), t0-gsiftp (GSI gsiftp://),
      t1a-xrd1, t1a-xrd2 (root://), t1a-gsiftp (gsiftp://),
      t1b-xrd (root://), t1b-ftp (anonymous ftp://)
    with a throw-away test CA, user proxy and grid-mapfile for GSI. Every
    xrootd also serves davs:// (HTTPS, HTTP-TPC) on its port: t0-davs,
    t1a-davs1, t1a-davs2, t1b-davs. `up --auth` adds t2-tok1/t2-tok2 (root://
    with a ztn token; davs t2-davs1/t2-davs2 need a token) and t2-gsi
    (roots:// with GSI). The testbed is its own token issuer: `token`.
    The inventory (endpoint names -> URLs) is $GRIDXFER_HOME/testbed/inventory.json;
    campaign files may use endpoint names instead of URLs.

    \b
    Typical use:
      gridxfer testbed up
      eval "$(gridxfer testbed env)"    # X509_CERT_DIR, X509_USER_PROXY, BEARER_TOKEN_FILE...
      gridxfer testbed status           # endpoint URLs, pids
      gfal-copy file:///etc/hosts gsiftp://localhost:PORT/.../t1a-gsiftp/data/hosts
      gridxfer testbed down
    """


@group.command("up")
@click.argument("topology", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the inventory as JSON.")
@click.option("--throttle", "throttles", multiple=True, metavar="NAME=RATE",
              type=params.Pair(params.byterate(MAX_BYTERATE)),
              help="Local grid: cap xrootd server NAME at RATE (e.g. t1a-xrd2=20MB/s). Repeatable.")
@click.option(
    "--size-limit",
    "limits",
    multiple=True,
    metavar="NAME=SIZE",
    type=params.Pair(params.size(MAX_SIZE)),
    help="Local grid: give server NAME a tmpfs data dir of SIZE (e.g. t1b-xrd=50MB; root).",
)
@click.option(
    "--auth",
    "with_auth",
    is_flag=True,
    help="Local grid: add t2-tok1, t2-tok2 (tokens: davs + ztn) and t2-gsi (roots:// GSI).",
)
@click.option("--dry-run", is_flag=True, help="Show what would be started; start nothing.")
def up_cmd(topology: str | None, as_json: bool, throttles: tuple[tuple[str, float], ...],
           limits: tuple[tuple[str, float], ...], with_auth: bool, dry_run: bool) -> None:
    """Start the testbed: the local loopback grid, or TOPOLOGY (netns tiers)."""
    if topology and (throttles or limits or with_auth):
        raise UsageError(
            "--throttle/--size-limit/--auth apply to the local grid only (not with TOPOLOGY)"
        )
    spec = None if topology else _local_spec(throttles, limits, with_auth)
    if dry_run:
        _dry_run_up(topology, spec)
        return
    if topology:
        inv = _netgrid().up(topology)
    else:
        from gridxfer.testbed import localgrid
        inv = localgrid.up(spec)
    _render_inventory(inv, as_json)


def _local_spec(throttles: tuple[tuple[str, float], ...] = (),
                limits: tuple[tuple[str, float], ...] = (), with_auth: bool = False):
    import dataclasses

    from gridxfer.testbed.localgrid import AUTH_SERVERS, DEFAULT_SERVERS, LocalGridSpec
    servers = DEFAULT_SERVERS + (AUTH_SERVERS if with_auth else ())
    rates = dict(throttles)
    sizes = {name: int(size) for name, size in limits}
    names = {s.name for s in servers}
    for name in [*rates, *sizes]:
        if name not in names:
            raise UsageError(f"unknown server {name!r} (one of: {', '.join(sorted(names))})")
    servers = tuple(dataclasses.replace(s, throttle=rates.get(s.name), size_limit=sizes.get(s.name))
                    for s in servers)
    return LocalGridSpec(servers=servers)


def _dry_run_up(topology: str | None, spec) -> None:
    if topology:
        from gridxfer.testbed.topology import load
        topo = load(topology)          # a dry run validates what `up` would reject
        click.echo(f"would start the network-namespace testbed {topo.name!r} described by "
                   f"{topology}: {len(topo.tiers)} tiers, {len(topo.hosts)} hosts, "
                   f"{len(topo.links)} links")
        for tier in topo.tiers:
            click.echo(f"  {tier.name:<12} {tier.subnet:<18} "
                       + ", ".join(f"{h.name} ({h.address})" for h in tier.hosts))
        return
    click.echo("would start on 127.0.0.1 (plus a test CA and proxy):")
    for s in spec.servers:
        extra = (f"  throttle {fmt_rate(s.throttle)}" if s.throttle else "") + \
                (f"  size {fmt_bytes(s.size_limit)}" if s.size_limit else "") + \
                (f"  auth {s.auth}" if s.auth != "none" else "")
        click.echo(f"  {s.name:<12} {s.kind:<7} tier {s.tier}{extra}")


def _render_inventory(inv: Inventory, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(inv.to_json(), indent=2, sort_keys=True))
        return
    click.echo(f"testbed up ({inv.mode}), inventory {inv_mod.inventory_path()}")
    for name, ep in sorted(inv.endpoints.items()):
        extra = []
        if ep.throttle:
            extra.append(f"throttle {fmt_rate(ep.throttle)}")
        if ep.size_limit:
            extra.append(f"size {fmt_bytes(ep.size_limit)}")
        if ep.auth not in ("", "none"):
            extra.append(ep.auth)
        click.echo(
            f"  {name:<14} {ep.tier:<6} {ep.url}" + (f"  ({', '.join(extra)})" if extra else "")
        )
        if ep.davs_name:
            note = "  (token)" if ep.davs_auth == "token" else ""
            click.echo(f"  {ep.davs_name:<14} {ep.tier:<6} {ep.davs_url}{note}")
    click.echo(
        'clients: eval "$(gridxfer testbed env)"; tokens: gridxfer testbed token --scope ...'
    )


@group.command("down")
@click.option("--dry-run", is_flag=True, help="Show what would be stopped; stop nothing.")
def down_cmd(dry_run: bool) -> None:
    """Stop every testbed server (whatever mode is up) and remove its files. Idempotent."""
    mode = _mode()
    if dry_run:
        if mode is None:
            click.echo("no testbed inventory; would still clean up left-overs of a killed `up`")
        else:
            inv = inv_mod.load_inventory()
            click.echo(f"would stop the {mode} testbed: {', '.join(sorted(inv.endpoints))}")
        return
    if mode == "netns":
        _netgrid().down()
    else:
        from gridxfer.testbed import localgrid
        localgrid.down()
    click.echo("testbed down")


@group.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def status_cmd(as_json: bool) -> None:
    """Show which testbed servers run and where."""
    mode = _mode()
    if mode == "netns":
        st = _netgrid().status()
    else:
        from gridxfer.testbed import localgrid
        st = localgrid.status()
    if as_json:
        click.echo(json.dumps(st, indent=2, sort_keys=True, default=str))
        return
    if not st.get("endpoints"):
        click.echo("no testbed is up")
        return
    click.echo(f"testbed ({st.get('mode')}): {'up' if st.get('up') else 'DOWN'}")
    for name, ep in sorted(st["endpoints"].items()):
        flag = "running" if ep.get("alive") else "DEAD"
        click.echo(f"  {name:<14} {flag:<8} pid {ep.get('pid')}  {ep.get('url')}")


@group.command("env")
@click.option("--token-lifetime", default="12h", show_default=True, metavar="DURATION",
              type=params.duration(MAX_DURATION),
              help="Lifetime of the bearer token written for the clients.")
def env_cmd(token_lifetime: float) -> None:
    """Print `export K=V` lines for clients; use with: eval "$(gridxfer testbed env)".

    \b
    X.509: X509_CERT_DIR, X509_USER_PROXY (the test CA and proxy).
    Token: a fresh token (storage.read:/ storage.modify:/) in a 0600 file named by
    BEARER_TOKEN_FILE (read by XRootD's ztn); BEARER_TOKEN is set from that file for
    gfal2, which reads only BEARER_TOKEN. The token itself is never printed."""
    from gridxfer.testbed import tokens as tok_mod
    lifetime = token_lifetime
    inv = inv_mod.load_inventory()
    for key, value in sorted(inv.client_env().items()):
        click.echo(f"export {key}={shlex.quote(value)}")
    issuer = tok_mod.grid_issuer(inv)
    if issuer is None:
        return
    path = inv_mod.testbed_dir() / TOKEN_FILE
    tok = tok_mod.mint(issuer, ["storage.read:/", "storage.modify:/"], lifetime=lifetime)
    state.write_atomic(path, tok + "\n", mode=0o600)
    click.echo(f"export BEARER_TOKEN_FILE={shlex.quote(str(path))}")
    click.echo(f'export BEARER_TOKEN="$(cat {shlex.quote(str(path))})"')


@group.command("token")
@click.option("--scope", "scopes", multiple=True, metavar="SCOPE",
              help="A WLCG scope such as storage.read:/ or storage.create:/sub (repeatable; "
                   "default storage.read:/). Paths are relative to the servers' /data.")
@click.option("--lifetime", default="1h", show_default=True, metavar="DURATION",
              type=params.duration(MAX_DURATION), help="How long the token is valid.")
@click.option("--audience", default=None, help="aud claim (default: the testbed's servers).")
@click.option("--subject", default=None, help="sub claim (default: gridxfer-tester).")
def token_cmd(scopes: tuple[str, ...], lifetime: float, audience: str | None,
              subject: str | None) -> None:
    """Print a bearer token signed by the testbed's issuer (WLCG profile), e.g.
    BEARER_TOKEN=$(gridxfer testbed token --scope storage.create:/up --lifetime 10m)."""
    from gridxfer.testbed import tokens as tok_mod
    seconds = lifetime
    wanted = tok_mod.check_scopes(scopes or ("storage.read:/",))
    issuer = tok_mod.grid_issuer(inv_mod.load_inventory())
    if issuer is None:
        raise TestbedError(
            "this testbed has no token issuer (the loopback grid of `gridxfer testbed up` has one)"
        )
    click.echo(tok_mod.mint(issuer, wanted, lifetime=seconds, audience=audience,
                            subject=subject or tok_mod.SUBJECT))


@group.command("exec", context_settings={"ignore_unknown_options": True})
@click.argument("host")
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_cmd(host: str, argv: tuple[str, ...]) -> None:
    """Run a command on testbed HOST with the client environment: exec HOST -- CMD...

    In local mode every host is this machine (HOST may be an endpoint name or "local").
    """
    inv = inv_mod.load_inventory()
    if inv.mode == "netns":
        code = _netgrid().exec_in(host, list(argv))
    else:
        if host not in inv.endpoints and host not in ("local", "localhost"):
            raise TestbedError(f"unknown host {host!r} (local mode: 'local' or an endpoint name)")
        try:
            code = subprocess.run(list(argv), env={**os.environ, **inv.client_env()},
                                  check=False).returncode
        except OSError as exc:
            raise TestbedError(f"cannot run {argv[0]}: {exc}") from exc
    raise click.exceptions.Exit(code)
