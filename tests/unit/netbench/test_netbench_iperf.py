"""Parsing of iperf3 -J output (samples trimmed from real runs on the netns testbed)."""
from __future__ import annotations

import pytest

from gridxfer.netbench import iperf
from gridxfer.netbench.iperf import BenchHost, NetbenchError, parse_tcp, parse_udp

TCP_DOC = {"end": {"sum_sent": {"bits_per_second": 442830441.28524065, "retransmits": 18, "seconds": 3.000123}, "sum_received": {"bits_per_second": 434852742.1827191, "seconds": 3.036158}}, "intervals": [{"sum": {"bits_per_second": 342842868.8943491, "seconds": 1.000120997428894, "omitted": False}}, {"sum": {"bits_per_second": 492837123.83321023, "seconds": 0.999987006187439, "omitted": False}}, {"sum": {"bits_per_second": 492823317.6111866, "seconds": 1.0000150203704834, "omitted": False}}], "server_output_json": {"intervals": [{"sum": {"bits_per_second": 313712946.19454134, "seconds": 1.000095009803772, "omitted": False}}, {"sum": {"bits_per_second": 495286180.4798917, "seconds": 1.0000070333480835, "omitted": False}}, {"sum": {"bits_per_second": 493589273.46287525, "seconds": 0.9999880194664, "omitted": False}}, {"sum": {"bits_per_second": 489793058.9242368, "seconds": 0.03606799989938736, "omitted": False}}]}}  # noqa: E501

UDP_DOC = {"end": {"sum": {"start": 0, "end": 3.020215, "seconds": 3.020215, "bytes": 37490600,
                           "bits_per_second": 99971334.3652962, "jitter_ms": 0.1055,
                           "lost_packets": 268, "packets": 26779, "lost_percent": 1.0007}}}


def test_parse_tcp_uses_receiver_side_numbers():
    run = parse_tcp(TCP_DOC, streams=4, duration=3.0)
    assert run.bits_per_second == pytest.approx(434852742.18)
    assert run.sent_bps == pytest.approx(442830441.29)
    assert run.retransmits == 18
    assert run.streams == 4
    # the server's (receiver's) intervals, without the 36 ms tail
    assert run.intervals_bps == pytest.approx((313712946.19, 495286180.48, 493589273.46))


def test_parse_tcp_without_server_output_falls_back_to_client_intervals():
    doc = {k: v for k, v in TCP_DOC.items() if k != "server_output_json"}
    doc["intervals"] = doc["intervals"] + [{"sum": {"bits_per_second": 1.0, "seconds": 1.0,
                                                    "omitted": True}}]
    run = parse_tcp(doc, streams=1, duration=3.0)
    assert len(run.intervals_bps) == 3
    assert run.intervals_bps[0] == pytest.approx(342842868.89)


def test_parse_udp_loss_fraction():
    run = parse_udp(UDP_DOC, 3.0)
    assert (run.packets, run.lost) == (26779, 268)
    assert run.loss_fraction == pytest.approx(268 / 26779)
    assert run.jitter_ms == pytest.approx(0.1055)
    with pytest.raises(NetbenchError, match="no datagrams"):
        parse_udp({"end": {"sum": {"packets": 0}}}, 3.0, what="a -> b")


def test_bench_host_wraps_commands_in_its_namespace():
    assert BenchHost("a", "198.18.1.10", "gx-t-a").argv(["iperf3", "-s"]) == [
        "ip", "netns", "exec", "gx-t-a", "iperf3", "-s"]
    assert BenchHost("l", "127.0.0.1").argv(["iperf3", "-s"]) == ["iperf3", "-s"]


# The error CI printed when the delay line's 1 % loss dropped the UDP set-up datagram.
LOST_SETUP = "iperf3 a1 -> c1: unable to read from stream socket: Resource temporarily unavailable"


@pytest.mark.parametrize("failures, calls", [(0, 1), (1, 2), (3, 4)])
def test_udp_retries_a_lost_setup_datagram(monkeypatch, failures, calls):
    """The handshake loss cannot be produced on demand here (no sch_netem, no tc actions), so
    _client is replaced by a stand-in that fails the way the real one did in CI."""
    seen = []

    def client(*args):
        seen.append(args)
        if len(seen) <= failures:
            raise NetbenchError(LOST_SETUP)
        return UDP_DOC

    monkeypatch.setattr(iperf, "_client", client)
    a, b = BenchHost("a1", "198.19.50.10"), BenchHost("c1", "198.19.52.10")
    run = iperf.udp_once(a, b, 5201, rate_bps=60e6, duration=3)
    assert (len(seen), run.packets) == (calls, 26779)


def test_udp_gives_up_after_the_last_attempt_and_never_retries_other_errors(monkeypatch):
    seen = []

    def client(*args, error=LOST_SETUP):
        seen.append(args)
        raise NetbenchError(error)

    a, b = BenchHost("a1", "198.19.50.10"), BenchHost("c1", "198.19.52.10")
    monkeypatch.setattr(iperf, "_client", client)
    with pytest.raises(NetbenchError, match="stream socket"):
        iperf.udp_once(a, b, 5201, rate_bps=60e6)
    assert len(seen) == iperf.SETUP_ATTEMPTS
    seen.clear()
    monkeypatch.setattr(iperf, "_client", lambda *a: client(*a, error="iperf3 a1 -> c1: timed out"))
    with pytest.raises(NetbenchError, match="timed out"):
        iperf.udp_once(a, b, 5201, rate_bps=60e6)
    assert len(seen) == 1


def test_read_tcp_is_the_one_parser_the_link_check_uses_too():
    """The link check's source reads reports with netbench's parser: errors name the run,
    and retransmits not reported stay unknown (the check then gives no retransmits)."""
    from gridxfer.monitoring.sources import iperf as source
    assert source.read_tcp is iperf.read_tcp
    with pytest.raises(NetbenchError, match=r"^iperf3 to h: unable to connect"):
        iperf.read_tcp({"error": "unable to connect to server"}, 1.0, what="to h")
    with pytest.raises(NetbenchError, match="no TCP summary"):
        iperf.read_tcp({"end": {}}, 1.0, what="to h")
    doc = {**TCP_DOC, "start": {"timestamp": {"timesecs": 1795260000}}}
    doc["end"] = {**doc["end"], "sum_sent": {"bits_per_second": 1.0}}
    r = iperf.read_tcp(doc, 3.0)
    assert r.retransmits is None and r.started == 1795260000
    assert len(r.intervals) == 3 and r.intervals[0].bits_per_second == pytest.approx(313712946.19)
    assert iperf.parse_tcp(doc, 1, 3.0).retransmits == 0          # netbench's view: 0
