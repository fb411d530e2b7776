"""Record -> validate -> write -> read back -> verify -> rollback, once for every target.

All or nothing: every key is validated before anything is written (``diff.py``: read and
classify every key, refuse the profile if one is invalid); the originals are saved
(``tuning.state``) before the first write; any failure restores them in reverse order. The
sysctl.d file of ``--persist`` (where, what it held, putting that back) is ``persist.py``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from gridxfer.errors import GridxferError, UsageError
from gridxfer.tuning import persist as persist_file
from gridxfer.tuning import state as tstate
from gridxfer.tuning.diff import CHANGE, INVALID, SKIPPED, Item, diff, raise_invalid
from gridxfer.tuning.profile import Profile, render_sysctl_d
from gridxfer.tuning.settings import read_values, same, write_values
from gridxfer.tuning.targets.base import TargetError, TuningTarget, WriteFailed


class ApplyFailed(GridxferError):
    """A write failed half-way; originals were restored (exit 1)."""


class CrashedApply(GridxferError):
    """A previous apply stopped half-way; its originals wait in the state file."""


class DriftDetected(GridxferError):
    """verify found values that differ from the profile (exit 1)."""


@dataclass(frozen=True)
class ApplyResult:
    profile: str
    host: str
    dry_run: bool
    items: tuple[Item, ...]
    persisted: str | None = None
    state_file: str | None = None

    @property
    def changed(self) -> tuple[Item, ...]:
        return tuple(i for i in self.items if i.status == CHANGE)

    @property
    def skipped(self) -> tuple[Item, ...]:
        return tuple(i for i in self.items if i.status == SKIPPED)


@dataclass(frozen=True)
class Drift:
    key: str
    expected: str
    actual: str | None


@dataclass(frozen=True)
class VerifyResult:
    profile: str
    host: str
    checked: int
    drifted: tuple[Drift, ...]
    skipped: tuple[Item, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.drifted


@dataclass(frozen=True)
class RollbackResult:
    host: str
    dry_run: bool
    restored: tuple[tstate.Original, ...]
    failed: tuple[tuple[str, str], ...] = ()
    profile: str = ""
    files: tuple[str, ...] = ()      # sysctl.d files written by --persist: removed or put back

    @property
    def ok(self) -> bool:
        return not self.failed


def apply(profile: Profile, target: TuningTarget, *, dry_run: bool = False,
          persist: bool = False, ifaces: Sequence[str] = (), skip_global: bool = False,
          force: bool = False) -> ApplyResult:
    if dry_run:
        return _apply(profile, target, True, persist, ifaces, skip_global, force)
    with tstate.host_lock(target.state_id, target.label):
        return _apply(profile, target, False, persist, ifaces, skip_global, force)


def _apply(profile: Profile, target: TuningTarget, dry_run: bool, persist: bool,
           ifaces: Sequence[str], skip_global: bool, force: bool) -> ApplyResult:
    old = tstate.load(target.state_id)
    if old and old.status == tstate.APPLYING:
        raise CrashedApply(f"{target.label}: a previous apply of {old.profile!r} stopped half-way; "
                           f"run `gridxfer tune rollback --host {target.label}` to restore the "
                           f"originals saved in {tstate.state_path(target.state_id)}")
    items = diff(profile, target, ifaces=ifaces, skip_global=skip_global, force=force)
    raise_invalid(items, target.label)
    changes = [i for i in items if i.status == CHANGE]
    dest = persist_file.path_for(profile.name) if persist else None
    if dry_run:
        return ApplyResult(profile.name, target.label, True, tuple(items), dest)
    originals = {i.key: i.current or "" for i in changes}
    path = tstate.state_path(target.state_id)
    file_now = tstate.PersistedFile(dest, persist_file.content(target, dest)) if dest else None
    recorded, touched = bool(changes or dest), []
    if recorded:        # before the first write; a full disk stops here, nothing written
        try:
            tstate.save(target.state_id, tstate.HostState(
                target.label, tstate.APPLYING, profile.name,
                tstate.merge_originals(old, originals), files=tstate.merge_files(old, file_now)))
        except tstate.StateWriteError as exc:
            raise tstate.StateWriteError(f"{exc}; nothing written") from None
    try:
        write_values(target, {i.key: i.expected for i in changes})
        back = read_values(target, [i.key for i in changes])
        for i in changes:
            if not same(back.get(i.key), i.expected):
                raise WriteFailed(i.key, f"read back {back.get(i.key)!r}, expected {i.expected!r}")
        if file_now:
            touched.append(file_now)
            target.put_file(file_now.path, render_sysctl_d(
                profile, header=f"written by gridxfer for {target.label}"))
        if recorded:
            tstate.save(target.state_id, tstate.HostState(
                target.label, tstate.APPLIED, profile.name, tstate.merge_originals(old, originals),
                files=tstate.merge_files(old, file_now)))
    except BaseException as exc:
        failed = _restore(target, [(k, v) for k, v in reversed(originals.items())])
        failed += persist_file.restore(target, touched)
        if failed:
            raise ApplyFailed(
                f"{target.label}: apply failed ({exc}); restoring also failed for "
                f"{', '.join(k for k, _ in failed)}; originals kept in {path}"
            ) from None
        try:
            if old:
                tstate.save(target.state_id, old)
            elif recorded:
                tstate.save(target.state_id,
                            tstate.HostState(target.label, tstate.RESTORED, profile.name))
        except tstate.StateWriteError:
            pass        # the state still holds the originals, now equal to the values in force
        if not isinstance(exc, (WriteFailed, TargetError, GridxferError)):
            raise
        raise ApplyFailed(f"{target.label}: apply of {profile.name} failed at {exc}; restored "
                          f"{len(originals)} value(s) in reverse order, nothing changed") from None
    return ApplyResult(profile.name, target.label, False, tuple(items), dest,
                       str(path) if recorded else None)


def _restore(target: TuningTarget, pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """Write each original back (reverse order given by the caller); return the failures."""
    failed: list[tuple[str, str]] = []
    try:
        write_values(target, dict(pairs))           # one round trip when all goes well
    except (WriteFailed, TargetError):
        for key, value in pairs:                    # else key by key, collecting failures
            try:
                write_values(target, {key: value})
            except (WriteFailed, TargetError) as exc:
                failed.append((key, str(exc)))
    back = read_values(target, [k for k, _ in pairs]) if pairs else {}
    done = {k for k, _ in failed}
    failed += [(k, f"read back {back.get(k)!r}, expected {v!r}") for k, v in pairs
               if k not in done and not same(back.get(k), v)]
    return failed


def verify(profile: Profile, target: TuningTarget, *, ifaces: Sequence[str] = (),
           skip_global: bool = False) -> VerifyResult:
    items = diff(profile, target, ifaces=ifaces, skip_global=skip_global, force=True)
    drifted = tuple(Drift(i.key, i.expected, i.current) for i in items
                    if i.status in (CHANGE, INVALID))
    return VerifyResult(profile.name, target.label,
                        sum(1 for i in items if i.status != SKIPPED), drifted,
                        tuple(i for i in items if i.status == SKIPPED))


def rollback(target: TuningTarget, *, dry_run: bool = False) -> RollbackResult:
    st = tstate.load(target.state_id)
    if st is None or st.status == tstate.RESTORED or not (st.originals or st.files):
        raise UsageError(f"{target.label}: nothing to roll back (no saved originals)")
    pairs = [(o.key, o.value) for o in reversed(st.originals)]
    paths = tuple(f.path for f in reversed(st.files))
    if dry_run:
        return RollbackResult(target.label, True, tuple(reversed(st.originals)), (), st.profile,
                              paths)
    with tstate.host_lock(target.state_id, target.label):
        failed = _restore(target, pairs) if pairs else []
        failed += persist_file.restore(target, st.files)
        if not failed:
            tstate.save(target.state_id, replace(st, status=tstate.RESTORED))
    bad = {k for k, _ in failed}
    return RollbackResult(target.label, False,
                          tuple(o for o in reversed(st.originals) if o.key not in bad),
                          tuple(failed), st.profile, tuple(p for p in paths if p not in bad))
