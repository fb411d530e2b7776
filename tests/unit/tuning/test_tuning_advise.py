"""BDP arithmetic of `tune advise` (the service-challenge numbers)."""
from __future__ import annotations

import pytest

from gridxfer.errors import UsageError
from gridxfer.tuning.advise import advice_profile, advise, next_pow2


def test_sc_path_1g_18ms():
    a = advise(1e9, 0.0182)
    assert a.bdp_bytes == 2_275_000                           # ~2.3 MB
    assert round(a.bdp_bytes / 1e6, 1) == 2.3
    assert 2.75e6 <= a.window_bytes <= 3.0e6                   # the seed's 2.75-3 MB windows
    assert a.kernel_allocates == 2 * a.window_bytes           # SO_RCVBUF doubled
    assert a.buffer_max == 8 * 2**20
    assert "2,275,000 bytes ~ 2.3 MB" in a.steps[0]


def test_streams_split_the_bdp():
    a = advise(10e9, 0.018, streams=4)
    assert a.bdp_bytes == 22_500_000 and a.per_stream_bdp == 5_625_000
    assert any(s.startswith("per stream: 22,500,000 / 4 streams") for s in a.steps)
    assert a.buffer_max == 16 * 2**20


def test_headroom_one_gives_bdp_window():
    a = advise(1e9, 0.1, headroom=1.0)
    assert a.window_bytes == a.bdp_bytes == 12_500_000


def test_profile_text_is_sysctl_d():
    text = advice_profile(advise(1e9, 0.0182), "sc")
    assert "net.core.rmem_max = 8388608" in text and text.startswith("# gridxfer profile: sc")


def test_pow2():
    assert [next_pow2(n) for n in (1, 2, 3, 1000, 1024, 1025)] == [1, 2, 4, 1024, 1024, 2048]


@pytest.mark.parametrize("kw", [dict(bandwidth_bps=0, rtt_s=0.01), dict(bandwidth_bps=1e9, rtt_s=0),
                                dict(bandwidth_bps=1e9, rtt_s=0.01, streams=0),
                                dict(bandwidth_bps=1e9, rtt_s=0.01, headroom=0.5)])
def test_bad_inputs(kw):
    with pytest.raises(UsageError):
        advise(**kw)


@pytest.mark.parametrize("bps, rtt, streams, headroom", [(1e10, 0.018, 4, 1.25),
                                                         (9e8, 0.0182, 1, 1.3),
                                                         (2.5e9, 0.15, 8, 1.0)])
def test_the_profile_s_source_line_is_a_command_that_gives_the_same_advice(bps, rtt, streams,
                                                                          headroom):
    """The '# source:' line runs as written (a rate with its unit, the headroom too) and
    advises the same sysctls (it printed '--bandwidth 1e+10', which the option refuses)."""
    from click.testing import CliRunner
    from gridxfer.cli.main import cli
    a = advise(bps, rtt, streams=streams, headroom=headroom)
    line = advice_profile(a, "p").splitlines()[1]
    assert line.startswith("# source: gridxfer tune advise ")
    args = line.removeprefix("# source: gridxfer ").split() + ["--json"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    import json
    assert json.loads(res.output)["sysctl"] == a.sysctl()
