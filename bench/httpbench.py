"""bench.bulk's davs:// tools: streamed uploads and HTTP third-party copies to the same
XRootD server's XrdHttp (TLS, the test CA, anonymous), gridxfer against its real peers.

  gx-davs      gridxfer campaign run, pool = davs:// (gfal2's HTTP plugin, davix, in process)
  gfal-davs    gfal-copy (davix), A parallel invocations, each --from-file its share
  xrdcp-http   xrdcp --allow-http to https:// (XrdCl's HTTP plugin, davix), one per file,
               A at a time
  gx-davs-tpc  gridxfer campaign run, davs -> davs, third_party: true (HTTP-TPC pull)
  gfal-tpc     gfal-copy --copy-mode pull (HTTP-TPC), A parallel invocations

The TPC tools copy from a second XRootD (``src``: beside this host on loopback, in the
client's tier with --wan) holding the same files. gfal-copy gets what gridxfer's HTTP-TPC
uses: ``Credential: none`` (XrdHttpTPC refuses gfal2's X.509 delegation) and no fallback
to streaming. Checksums: gridxfer verifies adler32 at both ends (the server's Want-Digest);
gfal-copy -K adler32 the same; xrdcp's HTTP plugin cannot ask the server for one
(``--cksum`` unsupported there): it runs without.
"""
from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from bench.common import BenchError, Stopwatch, gfal_parallel, gridxfer_run, write_campaign

HTTP_TOOLS = ("gx-davs", "gfal-davs", "xrdcp-http", "gx-davs-tpc", "gfal-tpc")
HTTP_GRIDXFER = ("gx-davs", "gx-davs-tpc")
SRC_SUB = "bulk-src"
_GFAL_TPC = ["-D", "HTTP PLUGIN:HEADERS=Credential: none",
             "-D", "HTTP PLUGIN:ENABLE_STREAM_COPY=false", "--copy-mode", "pull"]


def protocol(tool: str) -> str:
    return "davs-tpc" if tool.endswith("tpc") else "davs"


def seed_source(srcs: list[Path], data_dir: str, user: str) -> None:
    """The TPC tools' source: the data set on the source server (owned by its user)."""
    from gridxfer.testbed.xrootd import chown_tree
    d = Path(data_dir) / SRC_SUB
    d.mkdir(parents=True, exist_ok=True)
    for p in srcs:
        shutil.copyfile(p, d / p.name)
    chown_tree(d, user)


def http_runners(srcs: list[Path], davs_url: str, src_davs_url: str | None, work: Path, *,
                 active: int, checksum: bool, gx_streams: int,
                 gx_active: int) -> dict[str, Callable[[str], float]]:
    """tool -> run(sub) -> seconds, as bench.bulk's ``tool_runners``."""
    src_url = f"file://{srcs[0].parent}/"
    remote_src = (src_davs_url or "") + SRC_SUB + "/"

    def gx(source: str, tag: str, tpc: bool) -> Callable[[str], float]:
        def run(sub: str) -> float:
            spec = write_campaign(work / f"{tag}.yaml", f"bench-bulk-{tag}", source,
                                  [davs_url + sub + "/"], streams=gx_streams, active=gx_active,
                                  checksum=checksum)
            if tpc:
                spec.write_text(spec.read_text() + "third_party: true\n")
            return gridxfer_run(spec)
        return run

    def gfal(sub: str, tpc: bool = False) -> float:
        argv = ["gfal-copy", "-p", *(_GFAL_TPC if tpc else [])]
        if checksum:
            argv += ["-K", "adler32"]
        urls = [remote_src + p.name for p in srcs] if tpc else [f"file://{p}" for p in srcs]
        return gfal_parallel(argv, urls, davs_url + sub + "/", active, work,
                              "gfal-tpc" if tpc else "gfal-davs")

    def xrdcp(sub: str) -> float:
        """A workers, one xrdcp per file each: with several sources xrdcp needs a target
        it can stat as a directory, which its HTTP plugin cannot (exit 50)."""
        https = davs_url.replace("davs://", "https://", 1)
        sw = Stopwatch()
        errors: list[str] = []

        def share(k: int) -> None:
            for p in srcs[k::active]:
                res = subprocess.run(["xrdcp", "--allow-http", "--silent", str(p),
                                      https + sub + "/" + p.name], capture_output=True,
                                     text=True)
                if res.returncode != 0:
                    errors.append(res.stderr.strip()[-300:])
        workers = [threading.Thread(target=share, args=(k,)) for k in range(active)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        if errors:
            raise BenchError(f"xrdcp failed: {errors[0]}")
        return sw.seconds

    runners: dict[str, Callable[[str], float]] = {
        "gx-davs": gx(src_url, "davs", False), "gfal-davs": gfal, "xrdcp-http": xrdcp}
    if src_davs_url:
        runners["gx-davs-tpc"] = gx(remote_src, "davs-tpc", True)
        runners["gfal-tpc"] = lambda sub: gfal(sub, tpc=True)
    return runners
