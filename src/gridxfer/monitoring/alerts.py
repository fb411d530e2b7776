"""Passive Nagios alerts raised *during* a campaign when throughput drops.

``gridxfer campaign run --alert-cmd-file PATH --on-drop CMD`` feeds every rate sample
into a :class:`DropAlerter`. When the rate stays below the absolute floor (or below
``baseline_fraction`` x the moving baseline) for a WHOLE window, it writes one
``PROCESS_SERVICE_CHECK_RESULT`` line to the Nagios external command file and/or runs
the hook. It fires once per state change; recovery writes OK, and so does the end of the
campaign (``finish``: the passive service would otherwise keep its last state). The baseline is the
in-run moving average of the rate (see ``_Baseline``): a baseline alert resolves itself
once a lasting new level has been learnt; the floor alert does not.

The command file is normally a FIFO read by nagios: it is opened non-blocking, so a
stopped nagios never hangs a campaign (the alert is then recorded as undelivered).
The hook is an argument list (``shlex.split``), never a shell; it receives
``GRIDXFER_ALERT_STATE`` (OK/WARNING/CRITICAL), ``GRIDXFER_ALERT_CODE``,
``GRIDXFER_ALERT_MESSAGE``, ``GRIDXFER_CAMPAIGN`` and ``GRIDXFER_RATE_BPS`` in its
environment, on every state change (drop and recovery).
"""
from __future__ import annotations

import logging
import os
import shlex
import shutil
import socket
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gridxfer.errors import UsageError
from gridxfer.redact import redact
from gridxfer.units import fmt_duration, fmt_rate

log = logging.getLogger(__name__)

OK, WARNING, CRITICAL = 0, 1, 2
_NAMES = {OK: "OK", WARNING: "WARNING", CRITICAL: "CRITICAL"}


@dataclass(frozen=True)
class AlertEvent:
    """One state change, as sent to Nagios and to the hook."""

    ts: float
    code: int
    output: str
    perfdata: str
    line: str                      # the external command line written (without newline)
    delivered: bool                # written to the command file
    hook_started: bool

    @property
    def state(self) -> str:
        return _NAMES[self.code]


@dataclass
class _Baseline:
    """In-run moving average of the rate.

    While young it is the time-weighted mean of everything seen (a start-up burst is
    averaged out, not taken as the level); later an EWMA with time constant ``tau``.
    During a baseline drop it keeps learning, 4x slower: a lasting new level becomes the
    baseline in the end instead of locking a wrong one in forever.
    """

    tau: float
    value: float | None = None
    since: float | None = None     # first sample time
    last: float | None = None

    def ready(self, now: float, window: float) -> bool:
        return self.value is not None and self.since is not None and now - self.since >= window

    def update(self, now: float, rate: float, *, slow: bool = False) -> None:
        if self.value is None or self.last is None or self.since is None:
            self.value, self.since, self.last = rate, now, now
            return
        dt = max(0.0, now - self.last)
        self.last = now
        horizon = 4 * self.tau if slow else min(self.tau, max(now - self.since, dt))
        alpha = min(1.0, dt / horizon) if horizon > 0 else 1.0
        self.value += alpha * (rate - self.value)


class DropAlerter:
    """Feed it ``observe(now, rate)``; it alerts once per state change (see module doc)."""

    def __init__(self, *, campaign: str, floor_bytes_per_s: float | None,
                 baseline_fraction: float | None, window: float, cmd_file: Path | None,
                 on_drop: str | None, host: str | None = None,
                 service: str = "gridxfer_throughput") -> None:
        if window <= 0:
            raise UsageError(f"alert window must be positive, got {window}")
        if floor_bytes_per_s is not None and floor_bytes_per_s < 0:
            raise UsageError("alert floor must not be negative")
        if baseline_fraction is not None and not 0 < baseline_fraction < 1:
            raise UsageError(f"baseline fraction must be in (0, 1), got {baseline_fraction}")
        for name, text in (("host", host), ("service", service)):
            if text is not None and (";" in text or "\n" in text):
                raise UsageError(f"alert {name} must not contain ';' or newlines: {text!r}")
        self.campaign = campaign
        self.floor_bytes_per_s = floor_bytes_per_s
        self.baseline_fraction = baseline_fraction
        self.window = float(window)
        self.cmd_file = Path(cmd_file) if cmd_file else None
        self.on_drop = on_drop
        self.host = host or socket.gethostname()
        self.service = service
        self.events: list[AlertEvent] = []
        self._state = OK
        self._floor_since: float | None = None
        self._base_since: float | None = None
        self._baseline = _Baseline(tau=5 * self.window)
        self._hook: subprocess.Popen | None = None
        self._queue: list[dict[str, str]] = []
        self._argv = _command(on_drop) if on_drop is not None else None

    @property
    def state(self) -> str:
        return _NAMES[self._state]

    @property
    def baseline_bytes_per_s(self) -> float | None:
        return self._baseline.value

    def _below_baseline(self, now: float, rate: float) -> bool:
        base = self._baseline
        return (self.baseline_fraction is not None and base.ready(now, self.window)
                and bool(base.value) and rate < self.baseline_fraction * (base.value or 0.0))

    def observe(self, now: float, rate_bytes_per_s: float) -> None:
        """One sample of the campaign's aggregate rate at time ``now`` (unix seconds)."""
        self._reap()
        rate = max(0.0, float(rate_bytes_per_s))
        under_floor = self.floor_bytes_per_s is not None and rate < self.floor_bytes_per_s
        under_base = self._below_baseline(now, rate)
        self._floor_since = (self._floor_since if self._floor_since is not None else now) \
            if under_floor else None
        self._base_since = (self._base_since if self._base_since is not None else now) \
            if under_base else None
        if under_base and not under_floor:
            self._baseline.update(now, rate, slow=True)
        if not under_floor and not under_base:
            self._baseline.update(now, rate)
            if self._state != OK:
                self._emit(now, OK, rate, "throughput recovered")
            return
        if self._floor_since is not None and now - self._floor_since >= self.window:
            assert self.floor_bytes_per_s is not None
            code, since = CRITICAL, self._floor_since
            why = f"below floor {fmt_rate(self.floor_bytes_per_s)}"
        elif self._base_since is not None and now - self._base_since >= self.window:
            assert self._baseline.value and self.baseline_fraction
            code, since = WARNING, self._base_since
            why = (f"{100.0 * rate / self._baseline.value:.0f}% of baseline "
                   f"{fmt_rate(self._baseline.value)} (< {100 * self.baseline_fraction:.0f}%)")
        else:
            return          # below, but not for a whole window yet: keep the current state
        if code != self._state:
            self._emit(now, code, rate, f"{why} for {fmt_duration(now - since)}")

    def finish(self, now: float, summary: str, rate: float = 0.0) -> None:
        """The campaign has ended: one final OK, whatever the state was (a passive service
        keeps its last result: without this it stayed CRITICAL after the campaign)."""
        self._reap()
        self._emit(now, OK, rate, f"campaign ended: {summary}")

    def _emit(self, now: float, code: int, rate: float, why: str) -> None:
        self._state = code
        mbps = rate / 1e6
        output = (f"THROUGHPUT {_NAMES[code]} - campaign {self.campaign}: "
                  f"{fmt_rate(rate)}, {why}").replace("|", "/").replace("\n", " ")
        floor = f"{self.floor_bytes_per_s / 1e6:g}:" if self.floor_bytes_per_s is not None else ""
        perfdata = f"throughput_MBps={mbps:.3f};;{floor};0"
        self.send(now, code, output, perfdata, rate)

    def send(self, now: float, code: int, output: str, perfdata: str, rate: float = 0.0) -> None:
        """One passive result for this alerter's service, through its command file and its
        hook; the state becomes ``code`` (the tape alerts go the same way: tapealerts.py)."""
        self._state = code
        output = output.replace("|", "/").replace("\n", " ")
        line = (f"[{int(now)}] PROCESS_SERVICE_CHECK_RESULT;{self.host};{self.service};"
                f"{code};{output}|{perfdata}")
        delivered = self._write_command(line) if self.cmd_file else False
        started = self._run_hook(code, output, rate) if self._argv else False
        self.events.append(AlertEvent(now, code, output, perfdata, line, delivered, started))
        log.warning("alert %s: %s", _NAMES[code], output)

    def _write_command(self, line: str) -> bool:
        assert self.cmd_file is not None
        data = (line + "\n").encode()
        try:
            is_fifo = stat.S_ISFIFO(os.stat(self.cmd_file).st_mode)
        except FileNotFoundError:
            is_fifo = False
        flags = os.O_WRONLY | os.O_APPEND | (os.O_NONBLOCK if is_fifo else os.O_CREAT)
        try:
            fd = os.open(self.cmd_file, flags, 0o660)
        except OSError as exc:  # ENXIO: FIFO without a reader (nagios not running)
            log.warning("cannot open nagios command file %s: %s", self.cmd_file, exc.strerror)
            return False
        try:
            return os.write(fd, data) == len(data)   # < PIPE_BUF: one atomic write
        except OSError as exc:
            log.warning("cannot write nagios command file %s: %s", self.cmd_file, exc.strerror)
            return False
        finally:
            os.close(fd)

    def _run_hook(self, code: int, output: str, rate: float) -> bool:
        """Queue the hook; hooks run one at a time, in order, without blocking observe()."""
        assert self._argv is not None
        env = dict(os.environ, GRIDXFER_ALERT_STATE=_NAMES[code], GRIDXFER_ALERT_CODE=str(code),
                   GRIDXFER_ALERT_MESSAGE=output, GRIDXFER_CAMPAIGN=self.campaign,
                   GRIDXFER_RATE_BPS=f"{rate:.0f}")
        if self._hook is None and not self._queue:
            return self._start(env)
        self._queue.append(env)
        return True

    def _start(self, env: dict[str, str]) -> bool:
        assert self._argv is not None
        try:
            self._hook = subprocess.Popen(self._argv, env=env, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            return True
        except OSError as exc:
            log.warning("--on-drop hook %s failed to start: %s", self._argv[0], exc)
            return False

    def _reap(self) -> None:
        while True:
            if self._hook is not None and self._hook.poll() is None:
                return
            self._hook = None
            if not self._queue:
                return
            self._start(self._queue.pop(0))

    def close(self, timeout: float = 30.0) -> None:
        """Run queued hooks to completion (the campaign calls this at the end)."""
        while self._hook is not None or self._queue:
            if self._hook is not None:
                try:
                    self._hook.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    self._hook.kill()
                    self._hook.wait()
            self._reap()


def _command(text: str) -> list[str]:
    """``--on-drop``'s command line as argv, run without a shell; a UsageError for one that
    cannot be split, is empty, names no command on PATH, or carries a credential (the
    process list would show it: a secret goes in a file the command reads)."""
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"--on-drop: cannot split the command line: {exc}") from None
    if not argv:
        raise UsageError("--on-drop: empty command")
    if any(redact(a) != a for a in argv):
        raise UsageError("--on-drop: the command line carries a credential, which every "
                         "user would see in the process list; let the command read it "
                         "from a file")
    if shutil.which(argv[0]) is None:
        raise UsageError(f"--on-drop: no such command: {argv[0]!r}")
    return argv
