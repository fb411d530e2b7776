"""Live progress for ``campaign run``/``resume``: reads ``StatsSnapshot``s, never counts.

``LiveProgress`` is an observer (called about once a second by the scheduler) that
redraws a rich table: files done/total, bytes, aggregate and per-link rate, ETA and
failures, then the endpoints out of rotation and why, and the tiers whose whole pool is
down (``pooldown.py``). Used as a context manager around the run. ``--quiet`` does not
create it.
"""
from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from gridxfer.errors import GridxferError
from gridxfer.units import fmt_bytes, fmt_duration, fmt_rate
from gridxfer.campaign.accounting.stats import StatsSnapshot
from gridxfer.campaign.journal.names import name_of


def render(snap: StatsSnapshot, name: str, names: dict[str, str] | None = None) -> Group:
    eta = fmt_duration(snap.eta) if snap.eta is not None else "-"
    head = Text.assemble(
        (f"{name} ", "bold"),
        f"files {snap.files_done}/{snap.files_total}",
        (f"  failed {snap.files_failed}", "red" if snap.files_failed else "dim"),
        f"  active {snap.files_active}",
        f"  bytes {fmt_bytes(snap.bytes_done)}/{fmt_bytes(snap.bytes_total)}",
        f"  rate {fmt_rate(snap.rate)}",
        f"  ETA {eta}",
        f"  elapsed {fmt_duration(snap.elapsed)}")
    bar = Table.grid(padding=(0, 1))
    bar.add_row(ProgressBar(total=max(1, snap.bytes_total), completed=snap.bytes_done, width=60),
                f"{100 * snap.bytes_done / max(1, snap.bytes_total):.1f}% of bytes")
    table = Table(box=None, padding=(0, 1), header_style="bold")
    for col in ("link", "running/cap", "queued", "done", "failed", "bytes", "rate"):
        table.add_column(col, justify="left" if col == "link" else "right", no_wrap=True)
    table.add_column("optimizer", no_wrap=True, overflow="ellipsis", max_width=24)
    for link in snap.links:
        running = f"{link.active - link.ahead}/{link.cap}" + (
            f" +{link.ahead}" if link.ahead else ""
        )
        table.add_row(link.tier, running, str(link.queued),
                      f"{link.done}/{link.files_total}", str(link.failed),
                      fmt_bytes(link.bytes_done), fmt_rate(link.rate), link.reason)
    parts: list[Any] = [head, bar, table]
    if snap.failures:
        fails = ", ".join(f"{k} {v}" for k, v in sorted(snap.failures.items()))
        parts.append(Text(f"failed attempts: {fails}  (retries {snap.retries})", style="yellow"))
    parts.extend(Text(line, style=style) for line, style in health_lines(snap, names))
    return Group(*parts)


def health_lines(snap: StatsSnapshot,
                 names: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(line, style) per excluded endpoint (by name: why, and when it is looked at again)
    and per tier whose whole pool is down (what happens to its files, and when)."""
    out = []
    for e in snap.excluded:
        why = e.reason.split("; cooldown ")[0]
        back = (f" (probed again in {fmt_duration(max(0.0, e.until - snap.now))})"
                if e.until is not None else "")
        out.append((f"excluded {e.tier} {name_of(names or {}, e.url)}: {why}{back}", "yellow"))
    for d in snap.pools_down:
        left = fmt_duration(max(0.0, d.deadline - snap.now))
        todo = (f"waiting for it, its files fail in {left} (on_pool_down: wait)" if d.waiting
                else f"its files fail within {left} (on_pool_down: fail)")
        out.append((f"pool of {d.tier} down since {fmt_duration(max(0.0, snap.now - d.since))}"
                    f": {todo}", "bold red"))
    return out


class LiveProgress:
    def __init__(self, name: str, console: Console | None = None) -> None:
        self.name = name
        self.console = console or Console(stderr=True)
        self._live = Live(Text(f"{name}: starting..."), console=self.console,
                          refresh_per_second=2, transient=False)
        self._names: dict[str, str] | None = None

    def __enter__(self) -> LiveProgress:
        self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._live.__exit__(*exc)

    def __call__(self, snap: StatsSnapshot) -> None:
        if self._names is None:
            self._names = journal_names(self.name)
        self._live.update(render(snap, self.name, self._names))


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
