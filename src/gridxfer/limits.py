"""Upper bounds on every count, size, duration and rate a user gives, in one place.

Campaign files (``campaign.spec``) and command-line options (``cli``, the Nagios checks)
refuse a value above its bound with exit 2 and one line that says why::

    c.yaml:6: destinations[0].max_active: 20000 is above the limit 1000 (one worker thread
    per transfer slot, all tiers in one process; ...)

README.md ("Limits") lists them. Each bound has a reason, given in ``why``.
"""
from __future__ import annotations

from dataclasses import dataclass


DAY = 86400.0


@dataclass(frozen=True)
class Limit:
    high: float          # the largest value allowed
    shown: str           # the same, as a user would write it
    why: str

    def above(self, value: float, raw: object) -> str | None:
        """None if ``value`` is allowed, else the refusal (``raw`` as the user wrote it)."""
        if value <= self.high:
            return None
        return f"{raw} is above the limit {self.shown} ({self.why})"


# ------------------------------------------------------------------ campaign files
MAX_ACTIVE = Limit(1000, "1000", "one worker thread per transfer slot, all tiers in one "
                   "process; each transfer holds sockets and a file: more exhausts threads "
                   "and file descriptors before it adds throughput")
MAX_ACTIVE_TOTAL = Limit(MAX_ACTIVE.high, "1000", "the sum of max_active over all tiers: one "
                         "worker thread each, in one process")
MAX_STREAMS = Limit(64, "64", "TCP streams of one transfer: each is a connection, for "
                    "max_active transfers at once; GridFTP and XRootD gain nothing from more "
                    "on a path a few streams fill")
MAX_TCP_BUFFER = Limit(512 * 2**20, "512MiB", "per stream; the kernel doubles a socket "
                       "buffer into an int and caps it at net.core.[rw]mem_max; 512 MiB holds "
                       "100 Gbit/s x 40 ms")
MAX_RETRIES = Limit(100, "100", "attempts after the first, each journalled; a file that "
                    "fails 100 times fails for good: `campaign resume --retry-failed` tries again")
MAX_DURATION = Limit(7 * DAY, "7d", "one transfer or one wait; a week is longer than any "
                     "transfer, and keeps deadlines far from the 24.8-day overflow of "
                     "millisecond timeouts in C ints (poll, XrdCl, gfal2)")
MAX_RETRY_WAIT = Limit(7 * DAY, "7d", "the wait before the last retry, backoff x "
                       "2^(max-1): the backoff doubles after each attempt")
MAX_COOLDOWN = Limit(3600.0, "1h", "an endpoint's first time out after failures; it doubles "
                     "on each failed probe, so a longer start leaves a pool idle long after a "
                     "short outage")
MAX_MAX_COOLDOWN = Limit(DAY, "1d", "the longest an endpoint is left out between two probes")
MAX_FILE_SIZE = Limit(16 * 2**40, "16TiB", "ext4's largest file, far above any grid file; "
                      "sizes are summed in SQLite's 64-bit integers")

# ------------------------------------------------------------------ command-line options
MAX_WINDOW = Limit(366 * DAY, "366d", "a look-back window; a year keeps 'now - window' a "
                   "valid date")
MAX_BITRATE = Limit(10e12, "10Tbit/s", "above any network link (800 Gbit/s NICs today)")
MAX_BYTERATE = Limit(10e12 / 8, "1.25TB/s", "above any network link (800 Gbit/s NICs today)")
MAX_SIZE = Limit(2**60, "1024PiB", "above any storage; sizes stay in 64-bit integers")
MAX_RTT = Limit(60.0, "60s", "a round trip; a geostationary hop is 0.6 s")
IPERF3_MAX_DURATION = Limit(DAY, "1d", "iperf3 refuses -t above 86400 s")
IPERF3_MAX_OMIT = Limit(60.0, "60s", "iperf3 refuses -O above 60 s")
IPERF3_MAX_STREAMS = 128        # iperf3 refuses -P above 128 (click.IntRange in cli/netbench)

ALL = {name: value for name, value in globals().items()
       if isinstance(value, Limit)}
