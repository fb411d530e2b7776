"""XRootD movers (python3-xrootd, XrdCl)."""
from __future__ import annotations

import os
from pathlib import Path

# The native relay (relayabi.py loads it; `gridxfer --version` reports it without loading)
NATIVE_LIBRARY = Path(__file__).with_name("native") / "libgxrelay.so"
NATIVE_VAR = "GRIDXFER_XRD_NATIVE"


def native_off() -> bool:
    """``GRIDXFER_XRD_NATIVE=0``: small files take the Python relay even where it is built."""
    return os.environ.get(NATIVE_VAR, "1") == "0"


def native_state() -> str:
    """The native relay as `gridxfer --version` reports it (the library is not loaded)."""
    if not NATIVE_LIBRARY.is_file():
        return "not built (make native): small files take the Python relay"
    if native_off():
        return f"built, switched off ({NATIVE_VAR}=0)"
    return f"built ({NATIVE_LIBRARY})"
