"""Passive Nagios alerts raised during a campaign when TAPE falls behind.

``gridxfer campaign run --alert-cmd-file PATH --alert-tape-backlog 500 --alert-tape-wait 2h``
feeds each second's archive backlog (files copied to a tape-backed tier, not on tape yet)
and the longest wait among them into a :class:`TapeAlerter`. A bound exceeded for a WHOLE
``window`` sends one passive result on its own service (``gridxfer_tape``: throughput and
tape keep separate states) through the same path as the throughput alerts
(``alerts.DropAlerter.send``: the external command file, the ``--on-drop`` hook):

- WARNING: the backlog is above ``max_backlog`` files;
- CRITICAL: a file has waited longer than ``max_wait`` (it is heading for archive_timeout);
- OK once both are back under their bounds, and a final OK when the campaign ends.

Perfdata: ``archive_backlog`` (files) and ``tape_wait_s`` (the oldest wait).
"""
from __future__ import annotations

from gridxfer.errors import UsageError
from gridxfer.monitoring.alerts import CRITICAL, OK, WARNING, DropAlerter
from gridxfer.units import fmt_duration

SERVICE = "gridxfer_tape"
_NAMES = {OK: "OK", WARNING: "WARNING", CRITICAL: "CRITICAL"}


class TapeAlerter:
    def __init__(self, sender: DropAlerter, *, max_backlog: int | None, max_wait: float | None,
                 window: float) -> None:
        if max_backlog is None and max_wait is None:
            raise UsageError("tape alerts need --alert-tape-backlog or --alert-tape-wait")
        if max_backlog is not None and max_backlog < 0:
            raise UsageError(f"--alert-tape-backlog must not be negative, got {max_backlog}")
        if max_wait is not None and max_wait <= 0:
            raise UsageError(f"--alert-tape-wait must be positive, got {max_wait}")
        self.sender, self.window = sender, float(window)
        self.max_backlog, self.max_wait = max_backlog, max_wait
        self._code = OK
        self._since: dict[int, float | None] = {WARNING: None, CRITICAL: None}

    @property
    def state(self) -> str:
        return _NAMES[self._code]

    def observe(self, now: float, backlog: int, oldest_wait: float | None) -> None:
        over = {WARNING: self.max_backlog is not None and backlog > self.max_backlog,
                CRITICAL: (self.max_wait is not None and oldest_wait is not None
                           and oldest_wait > self.max_wait)}
        for code, bad in over.items():
            since = self._since[code]
            self._since[code] = (since if since is not None else now) if bad else None
        lasting = [c for c, s in self._since.items() if s is not None and now - s >= self.window]
        if not any(over.values()):
            if self._code != OK:
                self._send(now, OK, backlog, oldest_wait, "back under the bounds")
            return
        if not lasting:
            return                      # over a bound, not for a whole window yet
        code = max(lasting)
        if code != self._code:
            self._send(now, code, backlog, oldest_wait,
                       f"for {fmt_duration(now - (self._since[code] or now))}")

    def finish(self, now: float, summary: str, backlog: int = 0) -> None:
        """The campaign ended: a final OK on the tape service too."""
        self._send(now, OK, backlog, None, f"campaign ended: {summary}")

    def _send(self, now: float, code: int, backlog: int, wait: float | None, why: str) -> None:
        self._code = code
        parts = [f"{backlog} files waiting for tape"
                 + (f" (> {self.max_backlog})" if self.max_backlog is not None
                    and backlog > self.max_backlog else "")]
        if wait is not None:
            parts.append(f"oldest {fmt_duration(wait)}"
                         + (f" (> {fmt_duration(self.max_wait)})" if self.max_wait is not None
                            and wait > self.max_wait else ""))
        output = (f"TAPE {_NAMES[code]} - campaign {self.sender.campaign}: "
                  f"{', '.join(parts)}, {why}")
        warn = "" if self.max_backlog is None else str(self.max_backlog)
        crit = "" if self.max_wait is None else f"{self.max_wait:g}"
        perfdata = (f"archive_backlog={backlog};{warn};;0 "
                    f"tape_wait_s={0.0 if wait is None else wait:.1f};;{crit};0")
        self.sender.send(now, code, output, perfdata)
