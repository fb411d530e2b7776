"""Movers: copy one file between URLs with verified integrity. See base.py (seam) and
registry.py."""
from gridxfer.movers.base import Entry, Mover, TransferOutcome, TransferParams, normalise_adler32
from gridxfer.movers.capabilities import Capabilities, capabilities_of
from gridxfer.movers.registry import get_mover, mover_for, register

__all__ = ["Capabilities", "Entry", "Mover", "TransferOutcome", "TransferParams",
           "capabilities_of", "get_mover", "mover_for", "normalise_adler32", "register"]
