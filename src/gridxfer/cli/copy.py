"""`gridxfer copy SRC... DST`: parse, call ``movers.onecopy``, render.

The habits of gfal-copy and xrdcp: a bare path is a local file, a directory destination
(ending in '/', or an existing directory) receives the source's base name, ``-f``
overwrites, ``-p`` sets the streams, ``-K ADLER32[:VALUE]`` the checksum, progress on a
terminal (``-q`` none). Exit codes are gridxfer's: 0 copied, 1 a copy failed (the error
class leads the line: ``exists``, ``checksum``, ``source_missing``...), 2 bad input,
3 some of several sources failed, 4 interrupted (nothing partial is left).
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

import click

from gridxfer.cli import params
from gridxfer.errors import GridxferError, Interrupted, PartialFailure, UsageError
from gridxfer.limits import MAX_DURATION, MAX_STREAMS
from gridxfer.display import printable
from gridxfer.movers.names import valid_utf8
from gridxfer.redact import redact, redact_obj
from gridxfer.units import fmt_bytes, fmt_duration, fmt_rate


@click.command(name="copy")
@click.argument("args", nargs=-1, required=True, metavar="SRC... DST")
@click.option("-f", "--force", is_flag=True, help="Overwrite an existing destination.")
@click.option("-p", "--streams", "-n", "--nbstreams", "-S", "streams", default=1,
              show_default=True, metavar="N", type=params.Whole(MAX_STREAMS),
              help="TCP streams for the transfer (where the protocol has them); -n is "
                   "gfal-copy's, -S xrdcp's.")
@click.option("-K", "--checksum", "checksum", default=None, metavar="ADLER32[:VALUE]",
              help="Checksum algorithm (adler32, the default), or the value the source "
                   "must have.")
@click.option("--checksum-mode", default="both", show_default=True,
              type=click.Choice(["source", "target", "destination", "both", "none"],
                                case_sensitive=False),
              help="Where the checksum is compared (target = destination).")
@click.option("-t", "--timeout", default="1h", show_default=True, metavar="DURATION",
              type=params.duration(MAX_DURATION),
              help="Give up on a transfer after this long.")
@click.option("--tpc", is_flag=True, help="Third-party copy: server to server, no data "
                                         "through this host (root->root, gsiftp->gsiftp).")
@click.option("--dry-run", is_flag=True,
              help="Check sources and destinations as a copy would; copy nothing.")
@click.option("-q", "--quiet", "-s", "--silent", "quiet", is_flag=True,
              help="No progress and no summary; errors only (-s: xrdcp's).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def group(args: tuple[str, ...], force: bool, streams: int, checksum: str | None,
          checksum_mode: str, timeout: float, tpc: bool, dry_run: bool, quiet: bool,
          as_json: bool) -> None:
    """Copy SRC to DST (or several SRCs into the directory DST) with the campaign's
    integrity: a hidden temporary name, size and adler32 compared, then the rename; on
    any failure or Ctrl-C nothing partial is left.

    \b
    SRC and DST are URLs (root://, gsiftp://, ftp://, davs://, file://), local paths, or testbed
    endpoint names (t1a-xrd1/dir/file).
    Exit codes: 0 copied, 1 a copy failed, 2 bad input, 3 some of several
    sources failed, 4 interrupted."""
    from gridxfer.movers import onecopy
    from gridxfer.movers.gfal import systemca
    from gridxfer.movers.base import TransferParams
    if len(args) < 2:
        raise click.UsageError("give a source and a destination: gridxfer copy SRC... DST")
    algo, verify, expected = onecopy.checksum_params(checksum, checksum_mode)
    transfer = TransferParams(streams=streams, timeout=timeout, checksum=algo, verify=verify,
                              expected_checksum=expected, overwrite=force, third_party=tpc)
    for a in args:
        if not valid_utf8(a):          # bytes that are not UTF-8: gfal2 and XrdCl take UTF-8
            raise UsageError(f"{printable(a.encode('utf-8', 'backslashreplace').decode())}: "
                             f"not valid UTF-8; gridxfer copies names that are")
    urls = [onecopy.to_url(_resolve(a)) for a in args]
    systemca.apply()                    # before any TLS session: davs:// per request
    pairs = onecopy.destinations(urls[:-1], urls[-1])
    results = []
    for src, dst in pairs:
        if dry_run:
            r = onecopy.dry_run_one(src, dst, transfer)
        else:
            with _cancel_on_signal() as cancel:
                show = not (quiet or as_json) and sys.stderr.isatty()
                r = onecopy.copy_one(src, dst, onecopy.with_cancel(transfer, cancel),
                                     progress=_Progress(src) if show else None)
                if show:
                    click.echo(err=True)
            if r.error_class == "cancelled" and cancel.is_set():
                raise Interrupted(f"copy interrupted; nothing partial was left at "
                                  f"{redact(dst)}")
        results.append(r)
        if not as_json and (r.ok or len(pairs) > 1):
            _render(r, quiet)
    if as_json:
        click.echo(json.dumps(redact_obj([r.to_dict() for r in results]), indent=2))
    _exit(results)


def _resolve(arg: str) -> str:
    """A testbed endpoint name (``t1a-xrd1/dir/f``) as its URL when the testbed inventory
    knows it and no local file of that name exists; anything else as given."""
    if "://" in arg or arg.startswith(("/", ".")) or os.path.lexists(arg):
        return arg
    name = arg.partition("/")[0]
    try:
        from gridxfer.testbed.inventory import load_inventory
        inv = load_inventory()
    except (GridxferError, OSError):
        return arg
    if name not in inv.endpoints and not any(ep.davs_name == name
                                             for ep in inv.endpoints.values()):
        return arg
    os.environ.update(inv.client_env())     # the clients' X509_*/XRD_* before they load
    return inv.resolve(arg)


@contextlib.contextmanager
def _cancel_on_signal() -> Iterator[threading.Event]:
    """SIGINT/SIGTERM set the copy's cancel flag: the mover stops and the integrity path
    removes the temporary name (a KeyboardInterrupt could leave a copy thread writing)."""
    cancel = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield cancel
        return
    old = {s: signal.signal(s, lambda *_: cancel.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield cancel
    finally:
        for s, h in old.items():
            signal.signal(s, h)


class _Progress:
    """One line on the terminal (stderr), redrawn at most 4 times a second."""

    def __init__(self, src: str) -> None:
        self.name = printable(src.rstrip("/").rpartition("/")[2])[:40]
        self.start = self.last = time.monotonic()

    def __call__(self, done: int, total: int | None) -> None:
        now = time.monotonic()
        if now - self.last < 0.25 and done != total:
            return
        self.last = now
        rate = done / (now - self.start) if now > self.start else 0.0
        pct = f" {100 * done / total:3.0f}%" if total else ""
        click.echo(f"\r{self.name}: {fmt_bytes(done)}{pct} {fmt_rate(rate)}   ", err=True,
                   nl=False)


def _error(r) -> str:
    return printable(r.error or "") + (" (-f overwrites)" if r.error_class == "exists" else "")


def _render(r, quiet: bool) -> None:
    if not r.ok:
        click.echo(redact(f"gridxfer: error: {_error(r)}"), err=True)
        return
    if quiet:
        return
    if r.dry_run:
        click.echo(redact(f"would copy {printable(r.src)} -> {printable(r.dst)}: "
                          f"{fmt_bytes(r.bytes)} with {r.mode}"))
        return
    how = f"{r.streams} stream{'s' if r.streams != 1 else ''}, {r.mode}"
    check = f", adler32 {r.checksum}" if r.checksum else ""
    rate = r.bytes / r.seconds if r.seconds > 0 else 0.0
    click.echo(redact(f"copied {printable(r.src)} -> {printable(r.dst)}: {fmt_bytes(r.bytes)} "
                      f"in {fmt_duration(r.seconds)} ({fmt_rate(rate)}){check} ({how})"))


def _exit(results: list) -> None:
    failed = [r for r in results if not r.ok]
    if not failed:
        return
    if len(results) == 1:
        raise GridxferError(_error(failed[0]))
    if len(failed) == len(results):
        raise GridxferError(f"all {len(results)} copies failed")
    raise PartialFailure(f"{len(failed)} of {len(results)} copies failed")
