"""The one user-facing error family, and the single place errors become exit codes.

Conventions (ARCHITECTURE.md): 0 ok, 1 error, 2 usage or bad input, 3 partial
(some files failed), 4 interrupted but resumable. Nagios checks map onto 0-3 in
``gridxfer.monitoring.nagios`` and never use this table.
"""
from __future__ import annotations

import enum

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_PARTIAL = 3
EXIT_INTERRUPTED = 4


class GridxferError(Exception):
    """Base of every error a user may see. ``str(err)`` is one line for the terminal."""

    exit_code = EXIT_ERROR

    def lines(self) -> list[str]:
        """What the terminal shows: one line per error (one for most errors)."""
        return [str(self)]


class UsageError(GridxferError):
    """Bad arguments or bad input files (exit 2)."""

    exit_code = EXIT_USAGE


class SpecError(UsageError):
    """A malformed input file; the message names ``file:line`` and the field."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None) -> None:
        self.path, self.line, self.field = path, line, field
        where = ""
        if path:
            where = f"{path}:{line}: " if line else f"{path}: "
        what = f"{field}: " if field else ""
        super().__init__(f"{where}{what}{message}")


class SpecErrors(SpecError):
    """Every error found in one input file (each ``file:line: field: message``)."""

    def __init__(self, errors: list[SpecError]) -> None:
        self.errors = tuple(errors)
        first = errors[0]
        UsageError.__init__(self, f"{first} (and {len(errors) - 1} more in this file)")
        self.path, self.line, self.field = first.path, first.line, first.field

    def lines(self) -> list[str]:
        return [str(e) for e in self.errors]


class PartialFailure(GridxferError):
    """The command finished, but some items failed (exit 3)."""

    exit_code = EXIT_PARTIAL


class Interrupted(GridxferError):
    """Stopped early (Ctrl-C, SIGTERM); state is consistent and resumable (exit 4)."""

    exit_code = EXIT_INTERRUPTED


class ErrorClass(enum.StrEnum):
    """Why a transfer failed. Decides whether the scheduler retries (as FTS3 does)."""

    SOURCE_MISSING = "source_missing"      # ENOENT on the source: never retried
    EXISTS = "exists"                      # EEXIST and overwrite not allowed: never retried
    NO_SPACE = "no_space"                  # ENOSPC / quota: not retried on this endpoint
    PERMISSION = "permission"              # EACCES/EPERM/auth: never retried
    AUTH = "auth"                          # HTTP 401/403 (token refused or missing): never retried
    TIMEOUT = "timeout"                    # retried
    CONNECTION = "connection"              # refused/reset/unreachable: retried
    CHECKSUM = "checksum"                  # mismatch: bad copy deleted, then retried
    CANCELLED = "cancelled"                # interrupted by the user: resumed later
    BAD_NAME = "bad_name"                  # name unsafe in a URL or path: never retried
    ARCHIVE_TIMEOUT = "archive_timeout"    # copied, but not on tape in time: not retried
    STAGING = "staging"                    # the tape source was not brought online: not retried
    LOCKED = "locked"                      # the file is open in another session (HTTP 423,
    #                                        kXR_FileLocked): retried, not the endpoint's fault
    OTHER = "other"                        # unknown: retried

    @property
    def retryable(self) -> bool:
        return self in _RETRYABLE


_RETRYABLE = frozenset({ErrorClass.TIMEOUT, ErrorClass.CONNECTION, ErrorClass.CHECKSUM,
                        ErrorClass.OTHER, ErrorClass.NO_SPACE, ErrorClass.LOCKED})
# NO_SPACE is retryable *elsewhere*: the file may go to another endpoint of the pool,
# while the full endpoint is excluded by the selector.


class TransferError(GridxferError):
    """A single transfer failed; classified where it is raised."""

    def __init__(self, error_class: ErrorClass, message: str) -> None:
        self.error_class = error_class
        super().__init__(f"{error_class.value}: {message}")

    @property
    def retryable(self) -> bool:
        return self.error_class.retryable


def exit_code_for(exc: BaseException) -> int:
    """The only mapping from exceptions to process exit codes."""
    if isinstance(exc, GridxferError):
        return exc.exit_code
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    return EXIT_ERROR           # OSError (full disk, permissions...) and anything else
