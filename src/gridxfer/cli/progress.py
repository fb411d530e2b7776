"""Live progress for ``campaign run``/``resume``: reads ``StatsSnapshot``s, never counts.

``LiveProgress`` is an observer (called about once a second by the scheduler) that
redraws a rich table: files done/total, bytes, aggregate and per-link rate, ETA and
failures, then the endpoints out of rotation and why, and the tiers whose whole pool is
down (``pooldown.py``), the files copied to a tape-backed tier still waiting for
tape; it fits the terminal's width (``columns.py``: whole columns go,
never a figure). Not on a terminal it prints one line every ``GRIDXFER_PROGRESS_EVERY``.
Used as a context manager around the run. ``--quiet`` does not create it.
"""
from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from gridxfer.cli.columns import Column, lines, table
from gridxfer.display import printable
from gridxfer.errors import GridxferError
from gridxfer.redact import redact
from gridxfer.units import fmt_bytes, fmt_duration, fmt_rate
from gridxfer.campaign.accounting.stats import StatsSnapshot
from gridxfer.campaign.journal.names import name_of


def head_parts(snap: StatsSnapshot, name: str) -> list[str]:
    eta = fmt_duration(snap.eta) if snap.eta is not None else "-"
    return [f"{name} files {snap.files_done}/{snap.files_total}", f"failed {snap.files_failed}",
            f"active {snap.files_active}",
            f"bytes {fmt_bytes(snap.bytes_done)}/{fmt_bytes(snap.bytes_total)}",
            f"rate {fmt_rate(snap.rate)}", f"ETA {eta}", f"elapsed {fmt_duration(snap.elapsed)}"]


def link_columns(snap: StatsSnapshot) -> list[Column]:
    """The per-link table; at a narrow width optimizer, queued, bytes, failed go first."""
    ls = snap.links
    running = tuple(f"{ln.active - ln.ahead}/{ln.cap}" + (f" +{ln.ahead}" if ln.ahead else "")
                    for ln in ls)
    return [Column("link", tuple(ln.tier for ln in ls), right=False),
            Column("running/cap", running),
            Column("queued", tuple(str(ln.queued) for ln in ls), keep=3),
            Column("done", tuple(f"{ln.done}/{ln.files_total}" for ln in ls)),
            Column("failed", tuple(str(ln.failed) for ln in ls), keep=4),
            Column("bytes", tuple(fmt_bytes(ln.bytes_done) for ln in ls), keep=2),
            Column("rate", tuple(fmt_rate(ln.rate) for ln in ls)),
            Column("optimizer", tuple(ln.reason for ln in ls), keep=1, right=False, wrap=True)]


def render(snap: StatsSnapshot, name: str, names: dict[str, str] | None = None,
           width: int = 80) -> Group:
    head = Text("\n".join(lines(head_parts(snap, name), width)))
    head.stylize("bold", 0, len(name))
    bar = Table.grid(padding=(0, 1))
    bar.add_row(ProgressBar(total=max(1, snap.bytes_total), completed=snap.bytes_done,
                            width=max(10, min(60, width - 20))),
                f"{100 * snap.bytes_done / max(1, snap.bytes_total):.1f}% of bytes")
    parts: list[Any] = [head, bar, table(link_columns(snap), width)]
    if snap.failures:
        fails = ", ".join(f"{k} {v}" for k, v in sorted(snap.failures.items()))
        parts.append(Text(f"failed attempts: {fails}  (retries {snap.retries})", style="yellow"))
    parts.extend(Text(line, style=style) for line, style in health_lines(snap, names))
    return Group(*parts)


def progress_line(snap: StatsSnapshot, name: str) -> str:
    """One line for a log or a pipe: the head, then ``tier done/total rate`` per link."""
    links = "; ".join(f"{ln.tier} {ln.done}/{ln.files_total} {fmt_rate(ln.rate)}"
                      for ln in snap.links)
    return "  ".join(head_parts(snap, name)) + (f"  [{links}]" if links else "")


def health_lines(snap: StatsSnapshot,
                 names: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(line, style) per excluded endpoint (by name: why, and when it is looked at again)
    and per tier whose whole pool is down (what happens to its files, and when)."""
    out = []
    for e in snap.excluded:
        why = printable(e.reason.split("; cooldown ")[0])       # a tool's text: a file name
        back = (f" (probed again in {fmt_duration(max(0.0, e.until - snap.now))})"
                if e.until is not None else "")
        out.append((f"excluded {e.tier} {name_of(names or {}, e.url)}: {why}{back}", "yellow"))
    for d in snap.pools_down:
        left = fmt_duration(max(0.0, d.deadline - snap.now))
        todo = (f"waiting for it, its files fail in {left} (on_pool_down: wait)" if d.waiting
                else f"its files fail within {left} (on_pool_down: fail)")
        out.append((f"pool of {d.tier} down since {fmt_duration(max(0.0, snap.now - d.since))}"
                    f": {todo}", "bold red"))
    if snap.files_archiving:
        oldest = (f", the oldest for {fmt_duration(snap.tape_oldest)}"
                  if snap.tape_oldest is not None else "")
        out.append((f"tape: {snap.files_archiving} files copied, waiting for tape{oldest}",
                    "cyan"))
    return out


class LiveProgress:
    """On a terminal: a live table redrawn in place. Otherwise (cron, a pipe, a log): one
    ``progress_line`` every ``every`` seconds of the campaign (``GRIDXFER_PROGRESS_EVERY``,
    default 30 s; read on snapshot time, so a stalled campaign still says so) and a last
    one at the end."""

    def __init__(self, name: str, console: Console | None = None,
                 every: float | None = None) -> None:
        self.name = name
        self.console = console or Console(stderr=True)
        self.every = every if every is not None else progress_every()
        self._live: Live | None = None
        if self.console.is_terminal:
            self._live = Live(Text(f"{name}: starting..."), console=self.console,
                              refresh_per_second=2, transient=False)
        self._names: dict[str, str] | None = None
        self._last: StatsSnapshot | None = None
        self._printed: float | None = None

    def __enter__(self) -> LiveProgress:
        if self._live is not None:
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
        elif self._last is not None and self._printed != self._last.now:
            self._print(self._last)

    def __call__(self, snap: StatsSnapshot) -> None:
        if self._names is None:
            self._names = journal_names(self.name)
        self._last = snap
        if self._live is not None:
            self._live.update(render(snap, self.name, self._names, self.console.width))
        elif self._printed is None or snap.now - self._printed >= self.every:
            self._print(snap)

    def _print(self, snap: StatsSnapshot) -> None:
        self._printed = snap.now
        self.console.print(redact(progress_line(snap, self.name)), markup=False,
                           highlight=False, soft_wrap=True)


def progress_every() -> float:
    """``GRIDXFER_PROGRESS_EVERY`` (a duration: 30s, 5m), else 30 s (``envsettings``: a bad
    value was refused when the command started)."""
    from gridxfer import envsettings
    return envsettings.quantity("GRIDXFER_PROGRESS_EVERY")


def journal_names(campaign: str) -> dict[str, str]:
    """The endpoint names the campaign's journal holds (read once; {} if unreadable)."""
    import sqlite3
    from gridxfer.campaign.journal import names, store
    try:
        conn = store.connect(store.journal_path(campaign), readonly=True)
    except (OSError, sqlite3.Error, GridxferError):
        return {}
    try:
        return names.read(conn)
    except sqlite3.Error:
        return {}
    finally:
        conn.close()
