"""`make demo`: a real campaign on the embedded grid, end to end.

1. ``gridxfer testbed up`` starts real XRootD and GridFTP (GSI + anonymous) servers, and
   XRootD servers that want a WLCG bearer token (ztn + SciTokens) on root:// and davs://.
2. Source data (>= 1 GB of random files) is written into the T0 XRootD server.
3. ``gridxfer campaign run`` moves it to two T1 tiers over root://, gsiftp:// and
   ftp://, and to a third tier over davs:// with a bearer token (minted by the testbed's
   issuer into a 0600 file the campaign file names; never printed), and to a tape-backed
   tier (``archive:``: a file is done once XRootD says it is on tape; EMULATED drives
   behind xrootd's prepare plugin, docs/tape.md), with live progress; the report (with
   the tape figures) and a PNG timeline follow, then XRootD's answer for the files on tape
   and ``check_gridxfer_tape`` on the drives' CTA log.
4. A sample of destination files is checked with independent tools
   (``xrdfs query checksum`` for root://, ``xrdadler32`` on the stored file otherwise).
5. ``gridxfer testbed down`` tears everything down, even on failure or Ctrl-C.

As root with CAP_NET_ADMIN the grid is the network-namespace testbed of
``examples/topology-sc.yaml`` (T0 -> two T1 sites over emulated 18 ms / 1 Gbit WAN
links, one slow storage host, one that wants tokens: ``t1b-se02``); otherwise, or with
``GRIDXFER_DEMO_LOCAL=1``, the loopback grid (``testbed up --auth``).

Output goes to ``./demo-out`` (journal home, campaign file, PNG).
Environment: ``GRIDXFER_DEMO_FILES`` / ``GRIDXFER_DEMO_SIZE`` change the data set.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from dataclasses import dataclass

from gridxfer import envsettings
from gridxfer.errors import UsageError
from gridxfer.units import fmt_bytes

OUT = Path("demo-out").resolve()
CAMPAIGN = "demo-t0-t1"
SAMPLE_PER_TIER = 3
TOPOLOGY = Path(__file__).resolve().parents[3] / "examples" / "topology-sc.yaml"


@dataclass(frozen=True)
class Layout:
    """Which grid to bring up, and which endpoints the campaign uses."""

    topology: Path | None          # None = the loopback grid
    source: str                    # an XRootD endpoint name
    tiers: dict[str, tuple[tuple[str, ...], int, int]]   # tier -> (pool, streams, max_active)
    token_tiers: tuple[str, ...] = ()   # tiers whose endpoints want a bearer token
    tape_tier: str = ""            # a tier of ``tiers`` whose pool is tape-backed (archive:)


LOCAL = Layout(None, "t0-xrd", {
    "T1A": (("t1a-xrd1", "t1a-xrd2", "t1a-gsiftp"), 4, 6),
    "T1B": (("t1b-xrd", "t1b-ftp"), 2, 4),
    "T2-DAVS": (("t2-davs1", "t2-davs2"), 1, 4),
    "T1T": (("t1-tape",), 1, 4)}, ("T2-DAVS",), tape_tier="T1T")
NETNS = Layout(TOPOLOGY, "t0-se01-xrd", {
    "T1-A": (("t1a-se01-xrd", "t1a-se02-xrd", "t1a-se01-gsiftp"), 4, 6),
    "T1-B": (("t1b-se01-xrd", "t1b-se01-gsiftp"), 4, 4),
    "T1-B-DAVS": (("t1b-se02-davs",), 1, 4),
    "T1-B-TAPE": (("t1b-tape01-xrd",), 1, 4)}, ("T1-B-DAVS",), tape_tier="T1-B-TAPE")
TOKEN_FILE = "bearer-token"          # in OUT, 0600: the davs tier's token (never printed)
TOKEN_SCOPES = ("storage.read:/", "storage.modify:/")    # modify: a failed copy's clean-up
TOKEN_BASE = "/data"                 # the testbed servers' SciTokens base_path


def choose_layout() -> Layout:
    if os.environ.get("GRIDXFER_DEMO_LOCAL") == "1" or os.geteuid() != 0 or not TOPOLOGY.exists():
        return LOCAL
    name = probe_ns()
    probe = subprocess.run(["ip", "netns", "add", name], capture_output=True)
    if probe.returncode != 0:
        print("demo: no CAP_NET_ADMIN here; using the loopback grid")
        return LOCAL
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return NETNS


def probe_ns() -> str:
    """The namespace made to learn whether this process may make namespaces: under
    ``$GRIDXFER_NS_TAG`` like every testbed name, and this process's own (two demos or
    tests at once never take each other's probe for a missing capability)."""
    from gridxfer.testbed.netgrid import ns_name
    return ns_name("demo", f"probe{os.getpid()}")


def say(text: str) -> None:
    print(f"\n\033[1m==> {text}\033[0m", flush=True)


def gridxfer(*args: str, check: bool = True, capture: bool = False) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "gridxfer", *args]
    print("$ gridxfer " + shlex.join(args), flush=True)
    proc = subprocess.run(argv, text=True, capture_output=capture)
    if check and proc.returncode != 0:
        raise SystemExit(f"demo: `gridxfer {shlex.join(args)}` exited {proc.returncode}")
    return proc


def make_source_data(inv, source: str, files: int, size: int) -> int:
    src = inv.endpoints[source]
    data_dir = inv.local_path(src.url)
    assert data_dir is not None, f"{source} has no local data directory"
    target = data_dir / "store" / "raw"
    target.mkdir(parents=True, exist_ok=True)
    total = 0
    for i in range(files):
        with open(target / f"run{i:04d}.root", "wb") as fh:
            for left in range(size, 0, -(1 << 20)):
                fh.write(os.urandom(min(left, 1 << 20)))
        total += size
    for p in (target.parent, target):
        os.chmod(p, 0o755)
    return total


def write_token(path: Path) -> None:
    """A token of the testbed's issuer for the davs tier, straight into a 0600 file."""
    proc = gridxfer("testbed", "token", *(a for s in TOKEN_SCOPES for a in ("--scope", s)),
                    "--lifetime", "2h", capture=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(proc.stdout.strip() + "\n")


def write_campaign(path: Path, layout: Layout, token: Path | None = None) -> None:
    def token_line(tier: str) -> str:
        archive = "    archive: {timeout: 30m}\n" if tier == layout.tape_tier else ""
        if token is None or tier not in layout.token_tiers:
            return archive
        return f"    token: {{file: {token}, base: {TOKEN_BASE}}}\n{archive}"

    tiers = "".join(f"""\
  - tier: {tier}
    pool: [{", ".join(pool)}]
    streams: {streams}
    max_active: {max_active}
{token_line(tier)}""" for tier, (pool, streams, max_active) in layout.tiers.items())
    path.write_text(f"""\
# Written by `make demo`: endpoint names come from the testbed inventory.
campaign: {CAMPAIGN}
source: {{url: "{layout.source}/store/raw/", files: {{glob: "*.root"}}}}
destinations:
{tiers}checksum: {{algorithm: adler32, verify: both}}
retries: {{max: 3, backoff: 2s}}
timeout: 10m
""")


def _tool(argv: list[str], attempts: int = 2, required: bool = True) -> list[str] | None:
    """Run an XRootD tool; a failure is shown with its message and tried again."""
    for attempt in range(1, attempts + 1):
        if attempt > 1:
            time.sleep(2 * (attempt - 1))
        proc = subprocess.run(argv, text=True, capture_output=True)
        if proc.returncode == 0:
            return proc.stdout.split()
        print(f"  ({shlex.join(argv)} exited {proc.returncode}: {proc.stderr.strip()})")
    if required:
        raise SystemExit(f"demo: independent check failed: {shlex.join(argv)}")
    return None


def independent_checksum(inv, url: str) -> str:
    """adler32 from XRootD's own tools, not from gridxfer: the server's answer to
    `xrdfs query checksum`, or, if the server keeps failing that query (xrootd 5.5 answers
    "[3012] Program failed" now and then), `xrdadler32` on the file where the server keeps it."""
    parts = urlsplit(url)
    if parts.scheme == "root":
        from gridxfer.movers.urls import url_path
        path = url_path(url)
        local = inv.local_path(url)
        out = _tool(["xrdfs", parts.netloc, "query", "checksum", path], attempts=3,
                    required=local is None)
        if out is not None:
            return out[1].lower().zfill(8)      # "adler32 0a1b2c3d"
        print(f"  (falling back to xrdadler32 on the server's file {local})")
        return _xrdadler32(str(local))
    return _xrdadler32(str(inv.local_path(url)))


def _xrdadler32(path: str) -> str:
    out = _tool(["xrdadler32", path])
    assert out is not None              # required: _tool raises SystemExit instead
    return out[0].lower().zfill(8)


def verify_sample(inv, layout: Layout) -> int:
    from gridxfer.campaign.journal import store as journal
    conn = journal.connect(journal.journal_path(CAMPAIGN), readonly=True)
    try:
        samples = [(tier, row) for tier in layout.tiers for row in conn.execute(
            "SELECT src_url, dst_url FROM files WHERE tier=? AND state='done' "
            "ORDER BY RANDOM() LIMIT ?", (tier, SAMPLE_PER_TIER)).fetchall()]
    finally:
        conn.close()
    bad = 0
    for tier, row in samples:
        want = independent_checksum(inv, row["src_url"])
        got = independent_checksum(inv, row["dst_url"])
        ok = want == got
        bad += not ok
        print(f"  {'OK ' if ok else 'BAD'} {tier} {row['dst_url']}  adler32 {got} (source {want})")
    return bad


def tape_check(inv, layout: Layout) -> None:
    """What reached tape: XRootD's own answer for the files of the tape tier, and the Nagios
    tape check on the EMULATED drives' CTA log."""
    from gridxfer.campaign.journal import store as journal
    from gridxfer.movers import capabilities_of, mover_for
    name = layout.tiers[layout.tape_tier][0][0]
    ep = inv.endpoints[name]
    conn = journal.connect(journal.journal_path(CAMPAIGN), readonly=True)
    try:
        urls = [r[0] for r in conn.execute("SELECT dst_url FROM files WHERE tier=? AND "
                                           "state='done'", (layout.tape_tier,))]
    finally:
        conn.close()
    say(f"On tape at {name}: XRootD's query prepare for the {len(urls)} files of "
        f"{layout.tape_tier}")
    tape = capabilities_of(mover_for(ep.url)).tape
    if tape is not None and urls:
        counts: dict[str, int] = {}
        for st in tape.archive_status(urls).values():
            counts[st.residency.value] = counts.get(st.residency.value, 0) + 1
        print("  " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    say(f"check_gridxfer_tape on the drives' log {ep.tape_log} (EMULATED tape)")
    check = Path(__file__).resolve().parents[3] / "checks" / "check_gridxfer_tape"
    argv = [sys.executable, str(check), "--cta", ep.tape_log, "-W", "1h", "--min-volume", "0",
            "-w", "60:", "-c", "40:"]
    print("$ " + shlex.join(["check_gridxfer_tape", *argv[2:]]), flush=True)
    proc = subprocess.run(argv, text=True, capture_output=True)
    print(proc.stdout.strip() or proc.stderr.strip(), f"\n  (exit {proc.returncode})")


def data_set() -> tuple[int, int]:
    """(files, bytes each) of ``GRIDXFER_DEMO_FILES`` and ``GRIDXFER_DEMO_SIZE``; a
    UsageError for a value the demo cannot take (and for any bad GRIDXFER_* number)."""
    envsettings.check()
    return (envsettings.count("GRIDXFER_DEMO_FILES"),
            int(envsettings.quantity("GRIDXFER_DEMO_SIZE")))


def main() -> int:
    try:
        files, size = data_set()
    except UsageError as exc:
        print(f"demo: error: {exc}", file=sys.stderr)
        return 2
    OUT.mkdir(exist_ok=True)
    os.environ["GRIDXFER_HOME"] = str(OUT / "home")
    from gridxfer.testbed.inventory import load_inventory

    layout = choose_layout()
    gridxfer("testbed", "down", check=False, capture=True)   # leftovers of an earlier run
    try:
        if layout.topology:
            say(
                f"Bringing up the grid-in-a-box {layout.topology.name}: tiers in network "
                "namespaces, emulated WAN links, real xrootd + globus-gridftp-server with a GSI "
                "test CA"
            )
            gridxfer("testbed", "up", str(layout.topology))
        else:
            say("Bringing up the loopback grid (real xrootd + globus-gridftp-server, GSI test CA, "
                "token servers)")
            gridxfer("testbed", "up", "--auth")
        inv = load_inventory()
        os.environ.update(inv.client_env())
        gridxfer("testbed", "status")

        say(f"Writing {files} x {fmt_bytes(size)} of source data into {layout.source}")
        total = make_source_data(inv, layout.source, files, size)
        n = len(layout.tiers)
        print(f"  {fmt_bytes(total)} in {files} files, sent to {n} tiers = {fmt_bytes(n * total)}")

        token = OUT / TOKEN_FILE
        say(f"A bearer token for {', '.join(layout.token_tiers)} (the testbed's issuer; "
            f"scopes {' '.join(TOKEN_SCOPES)}) in {token}")
        write_token(token)
        spec = OUT / "demo-campaign.yaml"
        write_campaign(spec, layout, token)
        say(f"Running the campaign ({spec})")
        print(spec.read_text())
        gridxfer("campaign", "run", str(spec), "--replace")

        say("Report")
        png = OUT / "demo-timeline.png"
        gridxfer("campaign", "report", CAMPAIGN, "--png", str(png))
        print(f"\nPNG timeline: {png}")

        if layout.tape_tier:
            tape_check(inv, layout)

        say("Independent check of a sample (xrdfs query checksum / xrdadler32)")
        bad = verify_sample(inv, layout)
        if bad:
            print(f"demo: {bad} sampled file(s) do not match their source", file=sys.stderr)
            return 1
        say("Demo complete: every sampled file matches its source adler32")
        return 0
    finally:
        say("Tearing down the grid")
        gridxfer("testbed", "down", check=False)


if __name__ == "__main__":
    sys.exit(main())
