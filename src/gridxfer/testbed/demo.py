"""`make demo`: a real campaign on the embedded grid, end to end.

1. ``gridxfer testbed up`` starts real XRootD and GridFTP (GSI + anonymous) servers.
2. Source data (>= 1 GB of random files) is written into the T0 XRootD server.
3. ``gridxfer campaign run`` moves it to two T1 tiers over root://, gsiftp:// and
   ftp:// with live progress; the report and a PNG timeline follow.
4. A sample of destination files is checked with independent tools
   (``xrdfs query checksum`` for root://, ``xrdadler32`` on the stored file otherwise).
5. ``gridxfer testbed down`` tears everything down, even on failure or Ctrl-C.

Output goes to ``./demo-out`` (journal home, campaign file, PNG).
Environment: ``GRIDXFER_DEMO_FILES`` / ``GRIDXFER_DEMO_SIZE`` change the data set.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from ..units import fmt_bytes, parse_size

OUT = Path("demo-out").resolve()
CAMPAIGN = "demo-t0-t1"
SAMPLE_PER_TIER = 3


def say(text: str) -> None:
    print(f"\n\033[1m==> {text}\033[0m", flush=True)


def gridxfer(*args: str, check: bool = True, capture: bool = False) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "gridxfer", *args]
    print("$ gridxfer " + shlex.join(args), flush=True)
    proc = subprocess.run(argv, text=True, capture_output=capture)
    if check and proc.returncode != 0:
        raise SystemExit(f"demo: `gridxfer {shlex.join(args)}` exited {proc.returncode}")
    return proc


def make_source_data(inv, files: int, size: int) -> int:
    src = inv.endpoints["t0-xrd"]
    data_dir = inv.local_path(src.url)
    assert data_dir is not None, "t0-xrd has no local data directory"
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


def write_campaign(path: Path) -> None:
    path.write_text(f"""\
# Written by `make demo`: endpoint names come from the testbed inventory.
campaign: {CAMPAIGN}
source: {{url: "t0-xrd/store/raw/", files: {{glob: "*.root"}}}}
destinations:
  - tier: T1A                       # XRootD + GSI GridFTP
    pool: [t1a-xrd1, t1a-xrd2, t1a-gsiftp]
    streams: 4
    max_active: 6
  - tier: T1B                       # XRootD + anonymous FTP
    pool: [t1b-xrd, t1b-ftp]
    streams: 2
    max_active: 4
checksum: {{algorithm: adler32, verify: both}}
retries: {{max: 3, backoff: 2s}}
timeout: 10m
""")


def independent_checksum(inv, url: str) -> str:
    """adler32 from XRootD's own tools, not from gridxfer."""
    parts = urlsplit(url)
    if parts.scheme == "root":
        path = parts.path[1:] if parts.path.startswith("//") else parts.path
        out = subprocess.run(["xrdfs", parts.netloc, "query", "checksum", path],
                             text=True, capture_output=True, check=True).stdout.split()
        return out[1].lower().zfill(8)      # "adler32 0a1b2c3d"
    local = inv.local_path(url)
    out = subprocess.run(["xrdadler32", str(local)], text=True, capture_output=True,
                         check=True).stdout.split()
    return out[0].lower().zfill(8)


def verify_sample(inv) -> int:
    from ..campaign import journal
    conn = journal.connect(journal.journal_path(CAMPAIGN), readonly=True)
    bad = 0
    for tier in ("T1A", "T1B"):
        rows = conn.execute("SELECT src_url, dst_url FROM files WHERE tier=? AND state='done' "
                            "ORDER BY RANDOM() LIMIT ?", (tier, SAMPLE_PER_TIER)).fetchall()
        for row in rows:
            want = independent_checksum(inv, row["src_url"])
            got = independent_checksum(inv, row["dst_url"])
            ok = want == got
            bad += not ok
            print(f"  {'OK ' if ok else 'BAD'} {tier} {row['dst_url']}  adler32 {got} (source {want})")
    return bad


def main() -> int:
    OUT.mkdir(exist_ok=True)
    os.environ["GRIDXFER_HOME"] = str(OUT / "home")
    files = int(os.environ.get("GRIDXFER_DEMO_FILES", "16"))
    size = parse_size(os.environ.get("GRIDXFER_DEMO_SIZE", "64MB"))
    from .inventory import load_inventory

    gridxfer("testbed", "down", check=False, capture=True)   # leftovers of an earlier run
    try:
        say("Bringing up the embedded grid (real xrootd + globus-gridftp-server, GSI test CA)")
        gridxfer("testbed", "up")
        inv = load_inventory()
        os.environ.update(inv.client_env())
        gridxfer("testbed", "status")

        say(f"Writing {files} x {fmt_bytes(size)} of source data into t0-xrd")
        total = make_source_data(inv, files, size)
        print(f"  {fmt_bytes(total)} in {files} files, sent to 2 tiers = {fmt_bytes(2 * total)}")

        spec = OUT / "demo-campaign.yaml"
        write_campaign(spec)
        say(f"Running the campaign ({spec})")
        print(spec.read_text())
        gridxfer("campaign", "run", str(spec), "--replace")

        say("Report")
        png = OUT / "demo-timeline.png"
        gridxfer("campaign", "report", CAMPAIGN, "--png", str(png))
        print(f"\nPNG timeline: {png}")

        say("Independent check of a sample (xrdfs query checksum / xrdadler32)")
        bad = verify_sample(inv)
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
