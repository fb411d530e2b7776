"""`gridxfer netbench`: iperf3 measurements between testbed hosts (parse and render only)."""
from __future__ import annotations

import json

import click

from gridxfer.cli import params
from gridxfer.limits import IPERF3_MAX_DURATION, IPERF3_MAX_OMIT, IPERF3_MAX_STREAMS, MAX_BITRATE

_STREAMS = click.IntRange(1, IPERF3_MAX_STREAMS)
_DURATION = params.duration(IPERF3_MAX_DURATION)
_OMIT = params.duration(IPERF3_MAX_OMIT, zero=True)
_BITRATE = params.bitrate(MAX_BITRATE)
_JSON = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")


def _mbit(bps: float | None) -> str:
    return "-" if bps is None else f"{bps / 1e6:.1f}"


def _path_line(path) -> str:
    if path.rtt_s is None:
        return "path: no emulated link (same tier or unlinked tiers)"
    rate = f"{path.rate_bps / 1e6:.0f} Mbit/s" if path.rate_bps else "unlimited rate"
    return f"path: {path.rtt_s * 1e3:.1f} ms RTT, {rate}, loss {path.loss * 100:g} %"


def _emit(result, as_json: bool, render) -> None:
    from gridxfer.netbench.bench import to_json
    if as_json:
        click.echo(json.dumps(to_json(result), indent=2, sort_keys=True))
    else:
        for line in render(result):
            click.echo(line)


def _tcp_lines(r) -> list[str]:
    from gridxfer.netbench.stats import format_table
    s = r.summary
    out = [f"TCP {r.src} -> {r.dst}: {r.streams} stream(s), {r.duration:g} s x {r.repeat} run(s); "
           + _path_line(r.path),
           f"  {'run':>3}  {'Mbit/s':>9}  {'retransmits':>11}"]
    for i, run in enumerate(r.runs, 1):
        out.append(f"  {i:>3}  {run.bits_per_second / 1e6:>9.1f}  {run.retransmits:>11}")
    out.append(f"min/avg/max/stddev = {_mbit(s.min)}/{_mbit(s.avg)}/{_mbit(s.max)}/"
               f"{_mbit(s.stddev)} Mbit/s over {s.n} run(s)")
    what = (f"{r.interval_summary.n} one-second intervals" if r.histogram_of == "intervals"
            else f"{s.n} runs")
    out.append(f"frequency distribution of {what}:")
    out.extend(format_table(list(r.histogram)))
    return out


@click.group(name="netbench")
def group() -> None:
    """iperf3 benchmarks between hosts of the netns testbed (`gridxfer testbed up`).

    \b
    Hosts are testbed host names (see `gridxfer testbed status`), or `local`
    (this machine, where the topology attaches it to a tier with `controller:`).
    The iperf3 server runs in the destination host's namespace, the client in
    the source's.
    """


@group.command()
@click.argument("src")
@click.argument("dst")
@click.option("--streams", "-P", type=_STREAMS, default=1, show_default=True)
@click.option("--duration", "-t", default="10s", show_default=True, type=_DURATION,
              help="Length of each run.")
@click.option("--repeat", "-r", type=click.IntRange(1, 1000), default=1, show_default=True)
@click.option("--omit", default="0s", show_default=True, type=_OMIT,
              help="Skip this much slow start.")
@click.option("--histogram", "histogram_of", type=click.Choice(["intervals", "runs"]),
              default="intervals", show_default=True, help="What the distribution bins.")
@click.option("--bin-width", default=None, type=_BITRATE,
              help="Bin width, e.g. 25Mbit (default: automatic).")
@_JSON
def tcp(src, dst, streams, duration, repeat, omit, histogram_of, bin_width, as_json) -> None:
    """TCP throughput SRC -> DST: min/avg/max/stddev and a frequency distribution."""
    from gridxfer.netbench import bench
    res = bench.tcp(src, dst, streams=streams, duration=duration, repeat=repeat,
                    omit=omit, histogram_of=histogram_of,
                    bin_width_bps=bin_width)
    _emit(res, as_json, _tcp_lines)


@group.command()
@click.argument("src")
@click.argument("dst")
@click.option("--rate", "-b", required=True, type=_BITRATE, help="Offered load, e.g. 100Mbit.")
@click.option("--duration", "-t", default="10s", show_default=True, type=_DURATION)
@click.option("--length", "-l", type=click.IntRange(64, 65000), default=1400,
              show_default=True,
              help="Datagram payload bytes.")
@_JSON
def udp(src, dst, rate, duration, length, as_json) -> None:
    """UDP datagrams sent and lost SRC -> DST at a given rate."""
    from gridxfer.netbench import bench
    res = bench.udp(src, dst, rate_bps=rate, duration=duration,
                    length=length)

    def render(r):
        u = r.run
        return [f"UDP {r.src} -> {r.dst}: {_mbit(r.rate_bps)} Mbit/s offered, {r.length} B "
                f"datagrams, {r.duration:g} s; " + _path_line(r.path),
                f"datagrams sent {u.packets}, lost {u.lost}, loss {u.loss_fraction * 100:.3f} % "
                f"({u.loss_fraction:.3e}), jitter {u.jitter_ms:.3f} ms, "
                f"received {_mbit(u.bits_per_second)} Mbit/s"]
    _emit(res, as_json, render)


@group.command()
@click.argument("src")
@click.argument("dst")
@click.option("--count", "-c", type=click.IntRange(1, 10000), default=10, show_default=True)
@_JSON
def rtt(src, dst, count, as_json) -> None:
    """Round-trip time SRC -> DST (ping), against the configured link RTT."""
    from gridxfer.netbench import bench
    res = bench.rtt(src, dst, count=count)

    def render(r):
        return [f"RTT {r.src} -> {r.dst}: min/avg/max/mdev = {r.min_ms:.3f}/{r.avg_ms:.3f}/"
                f"{r.max_ms:.3f}/{r.mdev_ms:.3f} ms, median {r.median_ms:.3f} ms, "
                f"loss {r.loss_fraction * 100:.1f} %; " + _path_line(r.path)]
    _emit(res, as_json, render)


@group.command()
@click.argument("hosts", nargs=-1)
@click.option("--streams", "-P", type=_STREAMS, default=1, show_default=True)
@click.option("--duration", "-t", default="3s", show_default=True, type=_DURATION)
@_JSON
def matrix(hosts, streams, duration, as_json) -> None:
    """TCP throughput (Mbit/s) for every ordered pair of HOSTS (default: all)."""
    from gridxfer.netbench import bench
    res = bench.matrix(list(hosts) or None, streams=streams, duration=duration)

    def render(r):
        width = max(9, *(len(h) for h in r.hosts))
        out = [f"TCP Mbit/s, {r.streams} stream(s), {r.duration:g} s (row = source)",
               " " * (width + 2) + "".join(f"{h:>{width + 2}}" for h in r.hosts)]
        for s in r.hosts:
            cells = "".join(f"{'-' if s == d else _mbit(r.rate(s, d)):>{width + 2}}"
                            for d in r.hosts)
            out.append(f"{s:<{width + 2}}{cells}")
        return out
    _emit(res, as_json, render)


@group.command()
@click.argument("src")
@click.argument("dst")
@click.option("--before", required=True, help="Tuning profile measured first (baseline).")
@click.option("--after", required=True, help="Tuning profile measured second.")
@click.option("--streams", "-P", type=_STREAMS, default=1, show_default=True)
@click.option("--duration", "-t", default="10s", show_default=True, type=_DURATION)
@click.option("--repeat", "-r", type=click.IntRange(1, 1000), default=3, show_default=True)
@click.option("--omit", default="0s", show_default=True, type=_OMIT,
              help="Skip this much slow start.")
@click.option("--png", type=params.NewFile(), default=None,
              help="Write a histogram of both distributions here.")
@click.option("--dry-run", is_flag=True, help="Show what each profile would set; measure nothing.")
@_JSON
def compare(src, dst, before, after, streams, duration, repeat, omit, png, dry_run,
            as_json) -> None:
    """The same TCP measurement under two tuning profiles, side by side.

    Each profile is applied to both hosts' namespaces (per-namespace keys only;
    net.core.* is global and skipped), measured, then rolled back.
    """
    from gridxfer.netbench import compare as cmp
    if dry_run:
        plan = cmp.plan(src, dst, before=before, after=after)
        if as_json:
            click.echo(json.dumps(plan, indent=2, sort_keys=True))
        else:
            for prof, items in plan.items():
                click.echo(f"{prof}:")
                for it in items:
                    click.echo(f"  {it['target']}: {it['key']} {it['current']} -> "
                               f"{it['expected']} ({it['status']})")
        return
    res = cmp.compare(src, dst, before=before, after=after, streams=streams,
                      duration=duration, repeat=repeat,
                      omit=omit, png=png)

    def render(r):
        b, a = r.before.result, r.after.result
        out = [f"compare {r.src} -> {r.dst}: {b.streams} stream(s), {b.duration:g} s x "
               f"{b.repeat} run(s); " + _path_line(b.path),
               f"  {'':<22}{r.before.profile:>18}{r.after.profile:>18}"]
        for label, fn in (("min Mbit/s", lambda x: x.summary.min),
                          ("avg Mbit/s", lambda x: x.summary.avg),
                          ("max Mbit/s", lambda x: x.summary.max),
                          ("stddev Mbit/s", lambda x: x.summary.stddev)):
            out.append(f"  {label:<22}{_mbit(fn(b)):>18}{_mbit(fn(a)):>18}")
        out.append(f"  {'retransmits (total)':<22}{sum(x.retransmits for x in b.runs):>18}"
                   f"{sum(x.retransmits for x in a.runs):>18}")
        out.append(f"speed-up {r.after.profile} / {r.before.profile}: x{r.speedup:.1f}")
        for p in (r.before, r.after):
            out.append(f"{p.profile} set: " + ("; ".join(p.applied) or "nothing"))
            if p.skipped:
                out.append(f"{p.profile} skipped (global or NIC): {', '.join(p.skipped)}")
        if r.png:
            out.append(f"histogram: {r.png}")
        return out
    _emit(res, as_json, render)
