"""A tape-backed testbed endpoint: a real xrootd whose tape answers come from XRootD's own
prepare interface, over an EMULATED tape (no tape hardware).

Route chosen: the generic prepare plugin (``libXrdOfsPrepGPI-5.so``, xrootd-server-plugins
5.5), not the File Residency Manager (frm_xfrd/frm_purged). Reasons (docs/tape.md): it is
the interface WLCG tape endpoints answer today (EOS-CTA answers ``query prepare`` with the
same JSON, and FTS3/gfal2 poll archive and stage state through it), one request carries a
list of files (bulk, where FRM's state is only visible as per-file ``stat`` flags, and plain
XrdOss never sets the backup flag), and it needs no migration daemons with their own
config language.

    start_tape_xrootd(name, server_dir, tape=TapeSpec(...), tier="T1", **start_xrootd kwargs)
        -> Endpoint (tape_log, tape_drives, tape_rate set)

It writes ``run/tapegpi`` (the program xrootd runs: a Python script calling
``gridxfer.testbed.tapegpi``), starts xrootd with ``ofs.preplib libXrdOfsPrepGPI-5.so -admit
all -maxfiles 1024 -run run/tapegpi``, then the emulated drives as their own process
(``python -m gridxfer.testbed.tape --archive SERVER_DIR``, pidfile in ``run/``, so
``testbed down`` stops it with the server). The drives log CTA "Tape session finished"
lines (``emulated="true"``) to ``tape/cta-taped.log``: ``check_gridxfer_tape`` reads them.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import gridxfer
from gridxfer.testbed.inventory import Endpoint, TestbedError
from gridxfer.testbed.procs import spawn
from gridxfer.testbed.tapestore import TapeLayout
from gridxfer.testbed.xrootd import chown_tree, ensure_user, start_xrootd

GPI_LIB = "libXrdOfsPrepGPI-5.so"
MAX_FILES = 1024        # -maxfiles: the plugin's upper bound (default 48)
_SRC = Path(gridxfer.__file__).resolve().parent.parent


@dataclass(frozen=True)
class TapeSpec:
    drives: int = 4
    rate: float = 18e6              # bytes/s per drive
    mount: float = 2.0              # seconds per mount
    position: float = 0.5           # seconds per file
    min_age: float = 1.0            # a file unmodified this long is migrated
    purge: bool = False             # drop the disk copy once on tape (staging becomes real)
    max_session: float = 60.0

    def argv(self) -> list[str]:
        args = ["--drives", str(self.drives), "--rate", f"{self.rate:.0f}B/s",
                "--mount", f"{self.mount}s", "--position", f"{self.position}s",
                "--min-age", f"{self.min_age}s", "--max-session", f"{self.max_session}s"]
        return [*args, "--purge"] if self.purge else args


def _gpi_wrapper(run: Path, server_dir: Path) -> Path:
    """The program xrootd runs for each prepare request (its ``-run`` takes one path): a
    Python script whose paths are Python literals (no shell)."""
    python = sys.executable
    if any(c.isspace() for c in python):
        raise TestbedError(f"the prepare program needs a Python path without blanks: {python}")
    script = run / "tapegpi"
    script.write_text(
        f"#!{python}\nimport sys\nsys.path.insert(0, {str(_SRC)!r})\n"
        "from gridxfer.testbed.tapegpi import main\n"
        f"sys.exit(main([{str(server_dir)!r}, *sys.argv[1:]]))\n", encoding="utf-8")
    script.chmod(0o755)
    return script


def start_tape_xrootd(name: str, server_dir: Path, *, tape: TapeSpec | None = None,
                      **kwargs: Any) -> Endpoint:
    tape = tape or TapeSpec()
    server_dir = Path(server_dir).resolve()
    layout = TapeLayout.of(server_dir)
    layout.create()
    run = server_dir / "run"
    run.mkdir(parents=True, exist_ok=True)
    script = _gpi_wrapper(run, server_dir)
    log = server_dir / "tape" / "cta-taped.log"
    if os.geteuid() == 0:
        chown_tree(server_dir / "tape", kwargs.get("run_as") or ensure_user())
    ep = start_xrootd(name, server_dir, extra_config=[
        f"ofs.preplib {GPI_LIB} -admit all -maxfiles {MAX_FILES} -run {script}"], **kwargs)
    spawn("tape", [sys.executable, "-m", "gridxfer.testbed.tape", "--archive", str(server_dir),
                   "--log", str(log), *tape.argv()], run,
          env={**os.environ, "PYTHONPATH": str(_SRC)})
    return replace(ep, tape_log=str(log), tape_drives=tape.drives, tape_rate=tape.rate)
