"""Record -> validate -> write -> read back -> verify -> rollback, once for every target.

All or nothing: every key is validated before anything is written; the originals are saved
(``tuning.state``) before the first write; any failure restores them in reverse order. The
sysctl.d file of ``--persist`` (where, what it held, putting that back) is ``persist.py``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from gridxfer.errors import GridxferError, UsageError
from gridxfer.tuning import persist as persist_file
from gridxfer.tuning import state as tstate
from gridxfer.tuning.profile import NIC_PREFIX, Profile, render_sysctl_d
from gridxfer.tuning.settings import (
    UNSUPPORTED,
    nic_key,
    read_values,
    same,
    split_nic_key,
    write_values,
)
from gridxfer.tuning.targets.base import TargetError, TuningTarget, WriteFailed

SAME, CHANGE, SKIPPED, INVALID = "same", "change", "skipped", "invalid"
CC_KEY, CC_AVAIL = "net.ipv4.tcp_congestion_control", "net.ipv4.tcp_available_congestion_control"
LINK_RESETTING = ("mtu", "ring.")


class ValidationError(UsageError):
    """Some key cannot be applied; nothing was written (exit 2). ``items`` is the diff."""

    def __init__(self, message: str, items: Sequence[Item] = ()) -> None:
        super().__init__(message)
        self.items = tuple(items)


class ApplyFailed(GridxferError):
    """A write failed half-way; originals were restored (exit 1)."""


class CrashedApply(GridxferError):
    """A previous apply stopped half-way; its originals wait in the state file."""


class DriftDetected(GridxferError):
    """verify found values that differ from the profile (exit 1)."""


@dataclass(frozen=True)
class Item:
    key: str
    expected: str
    current: str | None
    status: str
    reason: str = ""
    where: str = ""


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


def diff(profile: Profile, target: TuningTarget, *, ifaces: Sequence[str] = (),
         skip_global: bool = False, force: bool = False) -> list[Item]:
    """Every setting of ``profile`` against ``target``: same / change / skipped / invalid."""
    wanted: list[tuple[str, str, bool, str]] = []       # resolved key, value, optional, where
    skipped: list[Item] = []
    for s in profile.settings:
        if not s.is_nic:
            wanted.append((s.key, s.value, s.optional, s.where))
        elif not ifaces:
            skipped.append(Item(s.key, s.value, None, SKIPPED, "no --iface given", s.where))
        else:
            wanted += [(nic_key(i, s.key[len(NIC_PREFIX):]), s.value, s.optional, s.where)
                       for i in ifaces]
    keys = [w[0] for w in wanted]
    has_cc = CC_KEY in keys
    current = read_values(target, keys + ([CC_AVAIL] if has_cc else []))
    scope = target.out_of_scope([k for k in keys if split_nic_key(k) is None])
    session = target.session_interfaces() if not force and any(
        split_nic_key(k) for k in keys) else frozenset()
    available = set((current.get(CC_AVAIL) or "").split())
    items = [_classify(k, v, opt, where, current.get(k), scope.get(k), skip_global, session,
                       available)
             for k, v, opt, where in wanted]
    return items + skipped


def _classify(key: str, value: str, optional: bool, where: str, cur: str | None,
              out_of_scope: str | None, skip_global: bool, session: frozenset[str],
              available: set[str]) -> Item:
    def bad(reason: str) -> Item:
        return Item(key, value, cur, SKIPPED if optional else INVALID, reason, where)

    nic = split_nic_key(key)
    if out_of_scope:
        if skip_global:
            return Item(key, value, cur, SKIPPED, out_of_scope, where)
        return bad(out_of_scope)
    if nic is None and cur is None:
        return bad("no such sysctl on this host")
    if cur == UNSUPPORTED:
        return Item(key, value, None, SKIPPED, "not supported by the device", where)
    if key == CC_KEY and value not in available:
        return bad(
            f"{value!r} not in tcp_available_congestion_control ({' '.join(sorted(available))})"
        )
    if same(cur, value):
        return Item(key, value, cur, SAME, "", where)
    if nic and nic[0] in session and nic[1].startswith(LINK_RESETTING):
        return Item(key, value, cur, INVALID,
                    f"{nic[0]} carries the SSH session and {nic[1]} can reset the link; "
                    "use --force", where)
    return Item(key, value, cur, CHANGE, "", where)


def _raise_invalid(items: Sequence[Item], label: str) -> None:
    bad = [i for i in items if i.status == INVALID]
    scope = [i for i in bad if i.reason.startswith("global")]
    if scope:
        keys = ", ".join(f"{i.key} ({i.where})" if i.where and i.where != i.key else i.key
                         for i in scope)
        raise ValidationError(f"{label}: {len(scope)} global-only key(s) belong to the whole "
                              f"host, not to this network namespace: {keys}; use --skip-global "
                              "to skip them; nothing written", items)
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        first = bad[0]
        raise ValidationError(
            f"{first.where + ': ' if first.where and first.where != first.key else ''}"
            f"{first.key} = {first.expected}: {first.reason}{more}; nothing written",
            items,
        )


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
    _raise_invalid(items, target.label)
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
