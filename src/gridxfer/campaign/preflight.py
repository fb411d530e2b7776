"""What ``run`` and ``run --dry-run`` refuse alike before the source is listed, so that
both say the same line and nothing is journalled; and the line a source that matched no
files ends with (both stop there too)."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gridxfer.errors import UsageError
from gridxfer.redact import WHERE_CREDENTIALS_GO, credential_in_url, redact
from gridxfer.campaign.journal import check as journalcheck, store as journal
from gridxfer.campaign.spec.schema import CampaignSpec
from gridxfer.campaign.fts3 import client as fts3_client
from gridxfer.campaign.engine import credentials
from gridxfer.campaign.engine.factories import default_ops_factory, tape_factory_for
from gridxfer.campaign.engine.tapeflow import _check_capable as check_tape


def may_plan(spec: CampaignSpec, replace: bool) -> Path:
    """The journal's path, unless `run` must refuse: a credential in a URL, a journal of
    the same name without --replace (a dry run refuses the same)."""
    refuse_credentials(spec)
    path = journal.journal_path(spec.name)
    if path.exists() and not replace and not journalcheck.unplanned(path):
        raise UsageError(f"campaign {spec.name!r} already has a journal ({path}); "
                         f"use `gridxfer campaign resume {spec.name}` or --replace")
    return path


def refuse_before_plan(spec: CampaignSpec, ops_factory: Callable | None = None) -> object:
    """What `run` and `--dry-run` refuse alike before the source is listed, so that both
    say the same line and nothing is journalled: a tape tier or staged source this host
    cannot ask (local engine), a bad ``fts3.token`` (FTS3 engine). Returns the FTS3 token
    it read (the run's client uses it: a ``command:`` source runs once), else UNREAD."""
    refuse_tape(spec, ops_factory)
    if spec.engine.kind == "fts3":
        return fts3_client.access_token(spec.engine)
    return fts3_client.UNREAD


def refuse_tape(spec: CampaignSpec, ops_factory: Callable | None = None) -> None:
    """`run` and `--dry-run` alike, before the source is listed: a tape-backed tier or a
    staged source whose protocol or server cannot say what is on tape (exit 2). Not for
    the FTS3 engine: FTS3 asks the tape, not this host."""
    if spec.engine.kind == "local":
        check_tape(spec, tape_factory_for(ops_factory or default_ops_factory))


def refuse_tokens(spec: CampaignSpec) -> None:
    """`run`, `--dry-run` and `resume` alike, before anything is asked of a server: a
    ``token:`` source that can never give a token (``credentials.never_usable``: a file
    others may read, one that holds no JWT, a missing or empty file, an unset variable) is
    one line, exit 2, naming the source and why (never the token); mid-run the same
    pauses the tier (a renewer may be rewriting the file). A token that is only
    short-lived is not refused: the tier pauses until a fresh one appears."""
    for what, ts in credentials.configured(spec):
        why = credentials.never_usable(ts)
        if why:
            where = f"{spec.path}: campaign" if spec.path else "campaign"
            raise UsageError(redact(f"{where} {spec.name!r}: the token of {what} cannot be "
                                    f"used: {why}"))


def refuse_credentials(spec: CampaignSpec) -> None:
    """A spec built in Python skips ``load_spec``'s check: refuse it here, too."""
    for url in spec.urls():
        what = credential_in_url(url)
        if what:
            raise UsageError(f"campaign {spec.name!r}: the URL {redact(url)!r} carries {what}: "
                             f"{WHERE_CREDENTIALS_GO}")


def no_files(spec: CampaignSpec) -> UsageError:
    src = spec.source
    where = (f"the list file {src.list_file} names no files" if src.mode == "list-file" else
             f"no file in {src.url}{' or below' if src.recursive else ''} matches "
             f"{src.glob or '*'!r}" if src.mode != "list" else "the file list is empty")
    return UsageError(f"campaign {spec.name!r}: the source matched no files ({where})")
