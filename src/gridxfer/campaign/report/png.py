"""``campaign report --png``: the timeline as a picture that tells what happened.

- the headline: files done and failed of the total, retries (attempts beyond each file's
  first), endpoints excluded, interrupts;
- throughput (aggregate and per link), with each interrupt (a red line) and resume;
- sessions in flight per destination endpoint, as whole numbers on an integer axis, with
  each endpoint's time out of rotation shaded, and the exclusions listed with their reasons;
- tape-backed tiers (``tape.curves``: copied to disk and on tape), when the campaign has
  them; a new tape state only needs a curve there.

``png_data`` reads the journal (the test's seam); ``write_png`` draws it.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gridxfer.errors import GridxferError, UsageError
from gridxfer.redact import redact
from gridxfer.campaign.journal import names as endpoint_names
from gridxfer.campaign.journal import store as journal
from gridxfer.campaign.report.filters import NO_FILTERS, Filters, scoped
from gridxfer.campaign.report.summary import MB, timeline

SHOWN_EXCLUSIONS = 6


@dataclass(frozen=True)
class Exclusion:
    endpoint: str                 # its name
    start: float                  # seconds since the first attempt
    end: float | None             # readmitted then; None: still out at the end
    reason: str


@dataclass(frozen=True)
class PngData:
    name: str
    state: str
    files_total: int
    files_done: int
    files_failed: int
    retries: int                  # attempts beyond each file's first (cancelled ones aside)
    exclusions: tuple[Exclusion, ...]
    interrupts: tuple[float, ...]     # seconds since the first attempt
    resumes: tuple[float, ...]
    timeline: dict[str, Any]
    tape: Any = None              # report/tape.TapeReport of tape-backed tiers, or None

    @property
    def headline(self) -> str:
        out = (f"campaign {self.name} ({self.state}): {self.files_done} done, "
               f"{self.files_failed} failed of {self.files_total} files; "
               f"{self.retries} retries")
        out += f"; {len(self.exclusions)} exclusions" if self.exclusions else ""
        out += f"; {len(self.interrupts)} interrupts" if self.interrupts else ""
        if self.tape is not None and self.tape.tiers:
            on = sum(t.on_tape for t in self.tape.tiers)
            back = sum(t.backlog for t in self.tape.tiers)
            lost = sum(t.failed for t in self.tape.tiers)
            out += f"; tape: {on} on tape, {back} archiving" + (f", {lost} failed" if lost else "")
        return redact(out)


def png_data(name: str, filters: Filters = NO_FILTERS) -> PngData:
    tl = timeline(name, filters=filters)
    with scoped(name, filters) as (conn, names):
        return _read(conn, name, names, tl, filters)


def _read(conn: Any, name: str, names: dict[str, str], tl: dict[str, Any],
          filters: Filters) -> PngData:
    meta = journal.get_meta(conn)
    tally = journal.tally(conn, indexed=not filters)
    count = {st: sum(by.get(st, (0, 0))[0] for by in tally.values()) for st in ("done", "failed")}
    total = sum(n for by in tally.values() for n, _ in by.values())
    retries = conn.execute("SELECT count(*) - count(DISTINCT file_id) FROM attempts "
                           "WHERE status <> 'cancelled'").fetchone()[0] or 0
    t0 = conn.execute("SELECT min(started) FROM attempts").fetchone()[0]
    t0 = float(t0) if t0 is not None else 0.0
    out: dict[str, list] = {"out": [], "interrupted": [], "resumed": []}
    open_: dict[tuple[str, str], tuple[float, str]] = {}
    for ts, kind, detail in conn.execute(
            "SELECT ts, kind, detail FROM events WHERE kind IN ('excluded', 'readmitted', "
            "'interrupted', 'resumed') ORDER BY id"):
        if kind in ("interrupted", "resumed"):
            out[kind].append(float(ts) - t0)
            continue
        d = _detail(detail)
        key = (str(d.get("tier", "?")), str(d.get("url", "?")))
        if filters.tier and key[0] != filters.tier:
            continue
        if kind == "excluded" and key not in open_:
            open_[key] = (float(ts) - t0, str(d.get("reason", "")).split("; cooldown ")[0])
        elif kind == "readmitted" and key in open_:
            start, why = open_.pop(key)
            out["out"].append(Exclusion(endpoint_names.name_of(names, key[1]), start,
                                        float(ts) - t0, why))
    out["out"] += [Exclusion(endpoint_names.name_of(names, k[1]), s, None, why)
                   for k, (s, why) in open_.items()]
    from gridxfer.campaign.report.tape import tape_report
    return PngData(name, meta.get("state", "?"), total, count["done"], count["failed"],
                   int(retries), tuple(sorted(out["out"], key=lambda e: e.start)),
                   tuple(out["interrupted"]), tuple(out["resumed"]), tl,
                   tape_report(conn, time.time()))


def _detail(text: str) -> dict[str, Any]:
    try:
        d = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return d if isinstance(d, dict) else {}


def write_png(name: str, path: str | Path, filters: Filters = NO_FILTERS) -> Path:
    out = Path(path)
    if not out.parent.is_dir():          # checked before drawing; never created
        raise UsageError(f"--png {path}: no such directory: {out.parent}")
    fig = draw(png_data(name, filters))
    try:
        fig.savefig(out, dpi=100, format="png")
    except OSError as exc:
        raise GridxferError(f"--png {path}: cannot write: {exc.strerror or exc}") from None
    finally:
        import matplotlib.pyplot as plt
        plt.close(fig)
    return out


def draw(data: PngData) -> Any:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator
    tl, tape = data.timeline, data.timeline.get("tape") or {}
    listed = data.exclusions[:SHOWN_EXCLUSIONS]
    fig, axes = plt.subplots(3 if tape else 2, 1, figsize=(10, (10 if tape else 7.5)
                                                               + 0.25 * len(listed)),
                             sharex=True, squeeze=False,
                             gridspec_kw={"height_ratios": [3, 2, 2] if tape else [3, 2]})
    ax1, ax2 = axes[0][0], axes[1][0]
    fig.suptitle(data.headline, fontsize=10)
    t = tl["t"]
    ax1.plot(t, np.array(tl["aggregate"]) / MB, color="black", lw=2, label="aggregate")
    for tier, ys in tl["links"].items():
        ax1.plot(t, np.array(ys) / MB, lw=1.2, label=f"link {tier}")
    for i, x in enumerate(data.interrupts):
        ax1.axvline(x, color="red", lw=1.5, label="interrupted" if i == 0 else None)
    for i, x in enumerate(data.resumes):
        ax1.axvline(x, color="green", lw=1, ls=":", label="resumed" if i == 0 else None)
    ax1.set_ylabel("throughput (MB/s)")
    ax1.grid(alpha=0.3)
    ax1.legend(loc="upper right", fontsize=8)
    ax1.set_ylim(bottom=0)
    colors: dict[str, Any] = {}
    for ep, ys in tl["sessions"].items():
        line, = ax2.step(t, ys, where="mid", lw=1.2, label=ep)
        colors[ep] = line.get_color()
    end = t[-1] if t else 0.0
    for e in data.exclusions:
        ax2.axvspan(e.start, e.end if e.end is not None else end, alpha=0.15,
                    color=colors.get(e.endpoint, "grey"))
    ax2.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax2.set_ylabel("sessions in flight")
    ax2.set_title("sessions per destination endpoint (shaded: excluded)", fontsize=9)
    ax2.grid(alpha=0.3)
    ax2.legend(loc="upper right", fontsize=7)
    ax2.set_ylim(bottom=0)
    if tape:
        ax3 = axes[2][0]
        for tier, c in tape.items():
            line, = ax3.plot(t, np.array(c["disk"]) / 1e9, lw=1.5, label=f"{tier} copied (disk)")
            ax3.plot(t, np.array(c["tape"]) / 1e9, lw=1.5, ls="--", color=line.get_color(),
                     label=f"{tier} on tape")
        ax3.set_ylabel("GB (cumulative)")
        ax3.set_title("tape-backed tiers: copied to disk and on tape (the gap is the backlog)",
                      fontsize=9)
        ax3.grid(alpha=0.3)
        ax3.legend(loc="upper left", fontsize=7)
        ax3.set_ylim(bottom=0)
    axes[-1][0].set_xlabel("seconds since start")
    notes = [exclusion_line(e) for e in listed]
    if len(data.exclusions) > len(listed):
        notes.append(f"... and {len(data.exclusions) - len(listed)} more exclusions")
    bottom = 0.03 + 0.025 * len(notes)
    for i, note in enumerate(notes):
        fig.text(0.01, bottom - 0.025 * (i + 1), note, fontsize=8, family="monospace")
    fig.tight_layout(rect=(0, bottom, 1, 0.96))
    return fig


def exclusion_line(e: Exclusion) -> str:
    def sec(x: float) -> str:
        return f"{x:.1f}s" if x < 100 else f"{x:.0f}s"
    span = f"{sec(e.start)}-{sec(e.end)}" if e.end is not None else f"{sec(e.start)}-end"
    return redact(f"excluded {span} {e.endpoint}: {e.reason}")[:140]
