"""Stable API of host tuning for other parts of gridxfer (netbench, monitoring, CLI).

    from gridxfer.tuning.api import load_profile, diff, apply, verify, rollback
    from gridxfer.tuning.targets.netns import NetnsTarget
    from gridxfer.tuning.targets.local import LocalTarget

    t = NetnsTarget("gx-a")
    res = apply(load_profile("dtn-10g"), t, skip_global=True)   # ApplyResult
    v = verify(load_profile("dtn-10g"), t, skip_global=True)     # VerifyResult: v.ok, v.drifted
    rollback(t)                                                  # RollbackResult

``ifaces`` names the interfaces NIC settings (txqueuelen, mtu, rings, pause, coalesce) go to;
without it NIC settings are reported as skipped. ``skip_global`` turns keys that are not the
target namespace's own (``TuningTarget.out_of_scope``: for ``netns:`` every key outside net.*
and the net.* keys the kernel keeps for the initial namespace, such as rmem_max or tcp_mem)
into skipped items instead of a ValidationError (whose ``items`` is the diff). Errors are
GridxferError subclasses: ValidationError (exit 2, nothing written), ApplyFailed (originals
restored), CrashedApply.
"""
from __future__ import annotations

from collections.abc import Sequence

from gridxfer.tuning.diff import Item, ValidationError
from gridxfer.tuning.diff import diff as _diff
from gridxfer.tuning.engine import (ApplyFailed, ApplyResult, CrashedApply, Drift,
                                    DriftDetected,
                     RollbackResult, VerifyResult)
from gridxfer.tuning.engine import apply as _apply
from gridxfer.tuning.engine import rollback as _rollback
from gridxfer.tuning.engine import verify as _verify
from gridxfer.tuning.profile import Profile, Setting, list_profiles, load_profile
from gridxfer.tuning.targets.base import TuningTarget

__all__ = ["load_profile", "list_profiles", "diff", "apply", "verify", "rollback", "Profile",
           "Setting", "Item", "ApplyResult", "VerifyResult", "Drift", "RollbackResult",
           "ValidationError", "ApplyFailed", "CrashedApply", "DriftDetected", "TuningTarget"]


def diff(profile: Profile, target: TuningTarget, *, ifaces: Sequence[str] = (),
         skip_global: bool = False) -> list[Item]:
    """Key by key: ``Item(key, expected, current, status in same|change|skipped|invalid)``."""
    return _diff(profile, target, ifaces=ifaces, skip_global=skip_global)


def apply(profile: Profile, target: TuningTarget, *, dry_run: bool = False,
          persist: bool = False, ifaces: Sequence[str] = (), skip_global: bool = False,
          force: bool = False) -> ApplyResult:
    """All-or-nothing apply; originals saved in $GRIDXFER_HOME/tuning/<host>.json."""
    return _apply(profile, target, dry_run=dry_run, persist=persist, ifaces=ifaces,
                  skip_global=skip_global, force=force)


def verify(profile: Profile, target: TuningTarget, *, ifaces: Sequence[str] = (),
           skip_global: bool = False) -> VerifyResult:
    """``VerifyResult.ok``; ``.drifted`` is a tuple of ``Drift(key, expected, actual)``."""
    return _verify(profile, target, ifaces=ifaces, skip_global=skip_global)


def rollback(target: TuningTarget, *, dry_run: bool = False) -> RollbackResult:
    """Restore the saved originals in reverse order (also after a crashed apply)."""
    return _rollback(target, dry_run=dry_run)
