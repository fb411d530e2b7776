"""What a mover (or any metadata object an ops factory gives) can do: ``capabilities_of``
reads it from the methods the object really has, against base.py's protocols."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, cast

from gridxfer.movers.base import (Checksums, Connects, Copied, CopiesMany, Entry, HasSpace,
                                  Lists, MakesDirs, Mover, Stats, Unlinks)
from gridxfer.movers.tape import Releases, TapeOps


@dataclass(frozen=True)
class Capabilities:
    """What a mover (or any metadata object an ops factory gives) can do, derived by
    ``capabilities_of`` from what it really has: each operation is the object's bound
    method, or None where it has none (so ``if caps.unlink: caps.unlink(url)``, typed).
    Nothing here is declared by hand: ``third_party`` comes from the mover's ``tpc_pairs``.
    Streams are not a capability: each copy reports the streams it really used
    (``TransferOutcome.streams_used``)."""

    stat: Callable[[str], Entry] | None = None
    listdir: Callable[[str], list[Entry]] | None = None
    checksum: Callable[[str, str], str] | None = None
    unlink: Callable[[str], None] | None = None
    mkdir: Callable[[str], None] | None = None
    space: Callable[[str], tuple[int, int]] | None = None
    third_party: bool = False       # server-to-server copy for some pair (tpc_pairs)
    # bulk archive / staging state (movers.tape): the object itself when it has all three
    # TapeOps methods; ``release`` unpins staged files
    tape: TapeOps | None = None
    release: Callable[..., None] | None = None
    connect: Callable[[str], None] | None = None    # a session opened ahead (Connects)
    # copies in one call, local sources confined by the mover (CopiesMany)
    copy_many: Callable[..., list[Copied]] | None = None


def capabilities_of(obj: object) -> Capabilities:
    """The operations ``obj`` really has (see ``Capabilities``)."""
    return Capabilities(
        stat=cast(Stats, obj).stat if _is(obj, Stats) else None,
        listdir=cast(Lists, obj).listdir if _is(obj, Lists) else None,
        checksum=cast(Checksums, obj).checksum if _is(obj, Checksums) else None,
        unlink=cast(Unlinks, obj).unlink if _is(obj, Unlinks) else None,
        mkdir=cast(MakesDirs, obj).mkdir if _is(obj, MakesDirs) else None,
        space=cast(HasSpace, obj).space if _is(obj, HasSpace) else None,
        third_party=bool(cast(Mover, obj).tpc_pairs) if _is(obj, Mover) else False,
        tape=cast(TapeOps, obj) if _is(obj, TapeOps) else None,
        release=cast(Releases, obj).release if _is(obj, Releases) else None,
        connect=cast(Connects, obj).connect if _is(obj, Connects) else None,
        copy_many=cast(CopiesMany, obj).copy_many if _is(obj, CopiesMany) else None)


def _is(obj: object, proto: type) -> bool:
    """``isinstance(obj, proto)`` for a runtime-checkable protocol, by the same rule (every
    member there, no method None) without typing's walk of the protocol's classes on each
    call: that cost ~10 us a protocol, ~0.1 ms a ``capabilities_of``, which the scheduler
    asks once a bundle (tests/unit/movers/test_movers_registry.py compares the two)."""
    methods, data = _MEMBERS.get(proto) or _members(proto)
    return (all(getattr(obj, m, None) is not None for m in methods)
            and all(hasattr(obj, d) for d in data))


_MEMBERS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _members(proto: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(methods, data members) of ``proto`` and the protocols it extends."""
    methods: set[str] = set()
    data: set[str] = set()
    for base in proto.__mro__:
        if not base.__dict__.get("_is_protocol") or base is Protocol:
            continue
        methods.update(n for n, v in base.__dict__.items()
                       if not n.startswith("_") and callable(v))
        data.update(n for n in base.__dict__.get("__annotations__", {}) if not n.startswith("_"))
    _MEMBERS[proto] = (tuple(sorted(methods)), tuple(sorted(data - methods)))
    return _MEMBERS[proto]
