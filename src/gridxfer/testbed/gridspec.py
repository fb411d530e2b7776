"""What a local grid consists of: its servers (name, kind, tier, limits, authentication).

``DEFAULT_SERVERS`` is the grid `gridxfer testbed up` starts; ``AUTH_SERVERS`` are the
servers with real authentication that `testbed up --auth` adds (see README, "The testbed").
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

from gridxfer.testbed import ca as ca_mod
from gridxfer.testbed.inventory import TestbedError
from gridxfer.testbed.tapexrd import TapeSpec
from gridxfer.testbed.xrdhttp import AUTH_MODES, AuthMode

Kind = Literal["xrootd", "gsiftp", "ftp"]


@dataclass(frozen=True)
class ServerSpec:
    name: str
    kind: Kind
    tier: str
    throttle: float | None = None      # bytes/s (xrootd only: the throttle plugin)
    size_limit: int | None = None      # bytes: data dir is a tmpfs of this size (root only)
    auth: AuthMode = "none"            # xrootd only: none | token | gsi (testbed.xrdhttp)
    davs_name: str = ""                # xrootd: the name of its davs:// URL (default derived)
    tape: TapeSpec | None = None       # xrootd: tape-backed (EMULATED drives, testbed.tapexrd)
    idle_timeout: int | None = None    # gridftp: s a control connection may stay idle (600)

    def davs_alias(self) -> str:
        """``t1a-xrd1`` -> ``t1a-davs1``; other names get ``-davs`` appended."""
        if self.davs_name or self.kind != "xrootd":
            return self.davs_name
        return self.name.replace("-xrd", "-davs", 1) if "-xrd" in self.name else f"{self.name}-davs"


DEFAULT_SERVERS: tuple[ServerSpec, ...] = (
    ServerSpec("t0-xrd", "xrootd", "T0"),
    ServerSpec("t0-gsiftp", "gsiftp", "T0"),
    ServerSpec("t1a-xrd1", "xrootd", "T1A"),
    ServerSpec("t1a-xrd2", "xrootd", "T1A"),
    ServerSpec("t1a-gsiftp", "gsiftp", "T1A"),
    ServerSpec("t1b-xrd", "xrootd", "T1B"),
    ServerSpec("t1b-ftp", "ftp", "T1B"),
    # tape-backed (EMULATED drives behind XRootD's prepare interface: docs/tape.md)
    ServerSpec("t1-tape", "xrootd", "T1T", tape=TapeSpec()),
)

# Endpoints with real authentication (`testbed up --auth`, or add them to a spec):
# two token servers (davs:// needs a WLCG token, root:// needs one through ztn) for
# HTTP-TPC with a token per side, and one GSI server (roots:// with an X.509 proxy).
AUTH_SERVERS: tuple[ServerSpec, ...] = (
    ServerSpec("t2-tok1", "xrootd", "T2", auth="token", davs_name="t2-davs1"),
    ServerSpec("t2-tok2", "xrootd", "T2", auth="token", davs_name="t2-davs2"),
    ServerSpec("t2-gsi", "xrootd", "T2", auth="gsi", davs_name="t2-gsi-davs"),
)


@dataclass(frozen=True)
class LocalGridSpec:
    servers: tuple[ServerSpec, ...] = DEFAULT_SERVERS
    base_parent: str | None = None     # parent of base_dir (default $GRIDXFER_TESTBED_DIR or /tmp)
    extra_env: dict[str, str] = field(default_factory=dict)
    gsi: ca_mod.GsiFiles | None = None  # reuse this test CA + proxy (e.g. one per test session)
    owner_pid: int | None = None        # tear the grid down when this process dies (test sessions)


def check_spec(spec: LocalGridSpec) -> None:
    names = [s.name for s in spec.servers]
    if len(set(names)) != len(names):
        raise TestbedError(f"duplicate server names in grid spec: {names}")
    for s in spec.servers:
        if s.kind not in ("xrootd", "gsiftp", "ftp"):
            raise TestbedError(f"server {s.name}: unknown kind {s.kind!r} (xrootd, gsiftp, ftp)")
        if s.throttle and s.kind != "xrootd":
            raise TestbedError(f"server {s.name}: throttle is only supported for xrootd")
        if s.auth not in AUTH_MODES or (s.auth != "none" and s.kind != "xrootd"):
            raise TestbedError(f"server {s.name}: auth {s.auth!r} needs kind xrootd and one of "
                               f"{', '.join(AUTH_MODES)}")
        if s.tape and s.kind != "xrootd":
            raise TestbedError(f"server {s.name}: only an xrootd can be tape-backed")
        if s.size_limit and os.geteuid() != 0:
            raise TestbedError(f"server {s.name}: size_limit needs root (tmpfs mount)")
    aliases = [s.davs_alias() for s in spec.servers if s.davs_alias()]
    clash = set(aliases) & set(names) or len(set(aliases)) != len(aliases)
    if clash:
        raise TestbedError(f"davs names clash with each other or with server names: {aliases}")
