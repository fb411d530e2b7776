"""PNG rendering of netbench results (matplotlib, Agg backend, no display needed)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gridxfer.netbench import stats

if TYPE_CHECKING:
    from gridxfer.netbench.compare import ProfileRun


def compare_png(before: ProfileRun, after: ProfileRun, path: Path) -> Path:
    """Throughput distributions (1 s intervals) of two profiles on common bins."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = []
    for run in (before, after):
        series.append([v / 1e6 for r in run.result.runs for v in r.intervals_bps])
    everything = [v for s in series for v in s] or [0.0]
    bins = stats.histogram(everything, target_bins=30)
    edges = [b.low for b in bins] + [bins[-1].high] if bins else [0.0, 1.0]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [3, 1]})
    colours = ("tab:red", "tab:blue")
    for run, values, colour in zip((before, after), series, colours, strict=True):
        avg = run.result.summary.avg / 1e6
        ax.hist(values, bins=edges, alpha=0.65, color=colour,
                label=f"{run.profile}: avg {avg:.0f} Mbit/s")
    ax.set_xlabel("throughput per 1 s interval (Mbit/s)")
    ax.set_ylabel("intervals")
    ax.legend()
    res = before.result
    path_txt = ""
    if res.path.rtt_s is not None:
        rate = f"{res.path.rate_bps / 1e6:.0f} Mbit/s" if res.path.rate_bps else "unlimited"
        path_txt = f" over {res.path.rtt_s * 1e3:.0f} ms RTT, {rate}"
    ax.set_title(f"{res.src} -> {res.dst}, {res.streams} stream(s){path_txt}")
    names = [before.profile, after.profile]
    avgs = [before.result.summary.avg / 1e6, after.result.summary.avg / 1e6]
    lows = [a - r.result.summary.min / 1e6 for a, r in zip(avgs, (before, after), strict=True)]
    highs = [r.result.summary.max / 1e6 - a for a, r in zip(avgs, (before, after), strict=True)]
    bx.bar(names, avgs, color=colours, yerr=[lows, highs], capsize=6)
    bx.set_ylabel("avg per run (Mbit/s), min-max bars")
    speed = avgs[1] / avgs[0] if avgs[0] else float("inf")
    bx.set_title(f"x{speed:.1f}")
    bx.tick_params(axis="x", labelrotation=15)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
