"""EMULATED tape system (no tape hardware involved) for the demo and the tests.

THIS IS AN EMULATION. N emulated drives drain a disk-buffer directory at a configured
per-drive rate, with mount and positioning time, cartridges that fill up, and an
injectable drive failure. Every session ends with a CTA ``cta-taped`` "Tape session
finished" line (key="value" text or JSON), marked ``emulated="true"`` and logged from
host ``emulated-tape``, so ``check_gridxfer_tape`` and ``check_gridxfer_buffer`` read it
exactly as they would read a real CTA log and change state for real.

The drives work on a ``testbed.tapequeue.TapeQueue``: by default the ``DrainQueue`` (a file
is renamed away from the buffer, "written" by sleeping size / rate, then deleted); with
``--archive SERVER_DIR`` the ``testbed.tapestore.ArchiveQueue`` of a tape-backed xrootd
(disk copy kept, tape copy recorded, stage requests read back: mountType Retrieve). A
session carries one kind of job. The log is opened per line, so it can be rotated underneath.

    python -m gridxfer.testbed.tape --buffer DIR --log cta-taped.log --drives 4 \\
        --rate 18MB/s --mount 2s --position 0.5s --cartridge 400GB [--fail-drive 1 \\
        --fail-after 30s] [--format json] [--duration 10m]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from gridxfer.errors import GridxferError, UsageError
from gridxfer.testbed.tapequeue import DrainQueue, TapeJob, TapeQueue
from gridxfer.testbed.tapestore import ArchiveQueue, TapeLayout
from gridxfer.units import parse_byterate, parse_duration, parse_size

EMULATION = "EMULATED tape (gridxfer.testbed.tape): no real tape hardware"
MOUNT_TYPES = {"archive": "ArchiveForUser", "retrieve": "Retrieve"}


@dataclass(frozen=True)
class TapeConfig:
    buffer: Path
    log: Path
    drives: int = 4
    rate: float = 18e6                    # bytes/s per drive while writing
    mount_time: float = 2.0
    position_time: float = 0.5            # per file
    unmount_time: float = 1.0
    cartridge: int = 400 * 10**9          # bytes per cartridge
    log_format: str = "text"              # text | json
    min_age: float = 0.0                  # only files unmodified this long
    max_session: float = 60.0             # end (and log) a session after this long
    poll: float = 0.2

    def __post_init__(self) -> None:
        if self.drives < 1 or self.rate <= 0 or self.cartridge <= 0:
            raise UsageError("emulated tape needs drives >= 1, rate > 0, cartridge > 0")
        if self.log_format not in ("text", "json"):
            raise UsageError("log format must be text or json")


@dataclass
class DriveStats:
    name: str
    sessions: int = 0
    files: int = 0
    bytes: int = 0
    down: bool = False
    vid: str = ""


@dataclass
class _Session:
    vid: str
    started: float
    mount_time: float
    kind: str = "archive"
    files: int = 0
    bytes: int = 0
    write_time: float = 0.0
    position_time: float = 0.0
    failed: bool = False
    extra: dict = field(default_factory=dict)


class EmulatedTape:
    """Start with :meth:`start`, stop with :meth:`stop`; :meth:`fail_drive` injects a fault."""

    def __init__(self, cfg: TapeConfig, queue: TapeQueue | None = None) -> None:
        self.cfg = cfg
        self.queue: TapeQueue = queue or DrainQueue(cfg.buffer, cfg.min_age)
        self.stats = [DriveStats(f"EMU-LTO-{i:02d}") for i in range(cfg.drives)]
        self._stop = threading.Event()
        self._fail = [threading.Event() for _ in range(cfg.drives)]
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._cart_free = [cfg.cartridge] * cfg.drives
        self._vid_seq = 0

    # --- control ---------------------------------------------------------------------
    def start(self) -> EmulatedTape:
        self.cfg.buffer.mkdir(parents=True, exist_ok=True)
        self.cfg.log.parent.mkdir(parents=True, exist_ok=True)
        self.cfg.log.touch()        # as cta-taped's log exists from its start, before a session
        for i in range(self.cfg.drives):
            t = threading.Thread(target=self._drive, args=(i,), daemon=True,
                                 name=f"emulated-tape-{i}")
            t.start()
            self._threads.append(t)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout)
        self._threads = []

    def fail_drive(self, index: int) -> None:
        """The drive fails mid-write: session logged as failure, drive stays down."""
        self._fail[index].set()

    def __enter__(self) -> EmulatedTape:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- drive loop ------------------------------------------------------------------
    def _next_vid(self) -> str:
        with self._lock:
            self._vid_seq += 1
            return f"E{self._vid_seq:05d}"

    def _claim(self, drive: int, kind: str | None = None) -> TapeJob | None:
        return self.queue.claim(self.stats[drive].name, kind,  # type: ignore[arg-type]
                                self.cfg.cartridge)

    def _sleep(self, seconds: float, drive: int) -> bool:
        """Sleep; False when stopping or the drive failed meanwhile."""
        end = time.monotonic() + seconds
        while not self._stop.is_set() and not self._fail[drive].is_set():
            left = end - time.monotonic()
            if left <= 0:
                return True
            time.sleep(min(left, 0.05))
        return False

    def _drive(self, i: int) -> None:
        st = self.stats[i]
        while not self._stop.is_set():
            if self._fail[i].is_set():
                st.down = True                 # failed while idle: just goes down
                self._log_down(i)
                return
            first = self._claim(i)
            if first is None:
                self._stop.wait(self.cfg.poll)
                continue
            if not st.vid or self._cart_free[i] < first.size:
                st.vid, self._cart_free[i] = self._next_vid(), self.cfg.cartridge
            s = _Session(vid=st.vid, started=time.time(), mount_time=self.cfg.mount_time,
                         kind=first.kind)
            if self._sleep(self.cfg.mount_time, i):
                self._write_files(i, s, first)
            else:
                self.queue.giveback(first)
            if self._fail[i].is_set():
                s.failed, st.down = True, True
                s.extra["Error_tapeWriteData"] = 1
            else:
                self._sleep(self.cfg.unmount_time, i)
            st.sessions += 1
            self._log(i, s)
            if st.down:
                self._log_down(i)
                return

    def _write_files(self, i: int, s: _Session, job: TapeJob | None) -> None:
        while job is not None:
            size = job.size
            if s.kind == "archive" and size > self._cart_free[i]:
                self.queue.giveback(job)       # does not fit: next cartridge
                s.extra["Info_tapeFilledUp"] = 1
                self._cart_free[i] = 0
                return
            t0 = time.monotonic()
            ok = self._sleep(self.cfg.position_time, i)
            s.position_time += time.monotonic() - t0
            t1 = time.monotonic()
            ok = ok and self._sleep(size / self.cfg.rate, i)
            if not ok:
                self.queue.giveback(job)       # failed or stopped: stays in the buffer
                return
            s.write_time += time.monotonic() - t1
            self.queue.done(job)
            s.files, s.bytes = s.files + 1, s.bytes + size
            if s.kind == "archive":
                self._cart_free[i] -= size
            st = self.stats[i]
            st.files, st.bytes = st.files + 1, st.bytes + size
            if time.time() - s.started >= self.cfg.max_session:
                return
            job = self._claim(i, s.kind)

    # --- CTA-format log ----------------------------------------------------------------
    def _log_down(self, i: int) -> None:
        """What cta-taped logs when it puts a drive down (DriveHandler::puttingDriveDown)."""
        self._write("Drive failed (EMULATED): putting the drive down", "ERROR", {
            "tapeDrive": self.stats[i].name, "event_name": "putting_tape_drive_down",
            "emulated": "true"})

    def _log(self, i: int, s: _Session) -> None:
        now = time.time()
        write = max(s.write_time, 1e-9)
        headers = s.files * 480
        fields: dict[str, object] = {
            "tapeDrive": self.stats[i].name, "tapeVid": s.vid, "mountType": MOUNT_TYPES[s.kind],
            "status": "failure" if s.failed else "success", "emulated": "true",
            "filesCount": s.files, "dataVolume": s.bytes, "headerVolume": headers,
            "mountTime": round(s.mount_time, 3), "positionTime": round(s.position_time, 3),
            "readWriteTime": round(s.write_time, 3), "totalTime": round(now - s.started, 3),
            "driveTransferSpeedMBps": round((s.bytes + headers) / write / 1e6, 2),
            "payloadTransferSpeedMBps": round(s.bytes / write / 1e6, 2), **s.extra}
        self._write("Tape session finished", "INFO", fields)

    def _write(self, msg: str, level: str, fields: dict[str, object]) -> None:
        now = time.time()
        if self.cfg.log_format == "json":
            line = json.dumps({"epoch_time": round(now, 6), "hostname": "emulated-tape",
                               "program": "cta-taped", "log_level": level,
                               "pid": os.getpid(), "tid": threading.get_native_id(),
                               "message": msg, **fields})
        else:
            iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
            kv = " ".join(f'{k}="{v}"' for k, v in fields.items())
            line = (f"{iso}.{int(now % 1 * 1e6):06d}+00:00 emulated-tape cta-taped: "
                    f'LVL="{level}" PID="{os.getpid()}" TID="{threading.get_native_id()}" '
                    f'MSG="{msg}" thread="MainThread" {kv}')
        with self._lock, open(self.cfg.log, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gridxfer.testbed.tape", description=EMULATION)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--buffer", type=Path, help="a disk buffer to drain")
    where.add_argument("--archive", type=Path, metavar="SERVER_DIR",
                       help="the server directory of a tape-backed xrootd (testbed/tapexrd.py)")
    p.add_argument("--min-age", default="0s", help="only files unmodified this long")
    p.add_argument("--purge", action="store_true",
                   help="--archive: drop the disk copy once on tape")
    p.add_argument("--log", type=Path, required=True)
    p.add_argument("--drives", type=int, default=4)
    p.add_argument("--rate", default="18MB/s", help="per drive")
    p.add_argument("--mount", default="2s")
    p.add_argument("--position", default="0.5s")
    p.add_argument("--cartridge", default="400GB")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--max-session", default="60s", help="log a session at least this often")
    p.add_argument("--fail-drive", type=int)
    p.add_argument("--fail-after", default="30s")
    p.add_argument("--duration", default="0", help="stop after this long (0: until Ctrl-C)")
    a = p.parse_args(argv)
    try:
        layout = TapeLayout.of(a.archive) if a.archive else None
        cfg = TapeConfig(buffer=layout.data if layout else a.buffer, log=a.log, drives=a.drives,
                         rate=parse_byterate(a.rate), mount_time=parse_duration(a.mount),
                         position_time=parse_duration(a.position),
                         cartridge=parse_size(a.cartridge), log_format=a.format,
                         max_session=parse_duration(a.max_session),
                         min_age=parse_duration(a.min_age))
        duration, fail_after = parse_duration(a.duration), parse_duration(a.fail_after)
    except GridxferError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{EMULATION}: {cfg.drives} drives x {cfg.rate / 1e6:.1f} MB/s draining "
          f"{cfg.buffer}, CTA log {cfg.log}", flush=True)
    queue = ArchiveQueue(layout, cfg.min_age, a.purge) if layout else None
    tape = EmulatedTape(cfg, queue).start()
    t0 = time.monotonic()
    try:
        while not duration or time.monotonic() - t0 < duration:
            if a.fail_drive is not None and time.monotonic() - t0 >= fail_after:
                tape.fail_drive(a.fail_drive)
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        tape.stop()
    for st in tape.stats:
        print(f"EMULATED {st.name}: {st.sessions} sessions, {st.files} files, "
              f"{st.bytes / 1e6:.1f} MB{' (DOWN)' if st.down else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
