"""Campaign core API: plan, run, resume (with crash recovery), status and list.

The CLI only parses and renders; these functions return typed, frozen results.

    run_campaign(path, ...) -> CampaignResult      # load spec, plan journal, schedule
    resume_campaign(name, ...) -> CampaignResult   # recover a killed run, schedule the rest
    cancel_campaign(name) -> CancelResult          # stop the runner, or cancel pending files

run, resume and cancel hold the campaign's lock (lock.py) from before the journal is
touched to the end: one runner per campaign.

Status and listing are ``report/status.py``'s. The FTS3 engine and ``reload.py`` are
imported when a campaign needs them: a local run starts without them (~13 ms).
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import sqlite3
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterable, Iterator, Sequence

from gridxfer.errors import GridxferError, UsageError
from gridxfer.redact import redact
from gridxfer.campaign.journal import planning, store as journal
from gridxfer.campaign.engine.credentials import Credentials
from gridxfer.movers import tokens as movers_tokens
from gridxfer.movers import routes
from gridxfer.movers.gfal import systemca
from gridxfer.movers.urls import scheme_of
from gridxfer.campaign.journal import names as endpoint_names
from gridxfer.campaign.spec.dataset import DatasetEntry, expand, refusal
from gridxfer.campaign.journal.store import CANCELLED
from gridxfer.campaign.journal.lock import CampaignLock
from gridxfer.campaign.engine.recovery import Swept, recover, sweep  # noqa: F401  (recover re-exported for callers)
from gridxfer.campaign.engine.scheduler import Observer, Scheduler
from gridxfer.campaign.engine import sessions
from gridxfer.campaign.engine.factories import ops_factory_for
from gridxfer.campaign.spec.schema import CampaignSpec, load_spec, spec_to_dict
from gridxfer.campaign.spec.model import by_priority
from gridxfer.campaign.spec import engine as engine_spec
from gridxfer.campaign.fts3 import client as fts3_client
from gridxfer.campaign import dryrun, preflight, results
from gridxfer.campaign.results import CampaignResult, FileFailure  # noqa: F401  (re-exported)
from gridxfer.campaign.cancel import CancelResult, cancel_campaign  # noqa: F401  (re-exported)

log = logging.getLogger(__name__)


# ------------------------------------------------------------------ environment
def prepare_environment(spec: CampaignSpec) -> None:
    """Before any mover is imported or thread started: endpoint names that came from the
    testbed inventory give clients its environment (X509_*, XRD_*), and for a campaign
    with a davs/https URL OpenSSL's default CA file is skipped where its hashed directory
    holds the same certificates (davix parses that file on every request:
    ``movers/gfal/systemca``; the check reads both, ~6 ms a start no other campaign pays)."""
    if any(scheme_of(u) in routes.HTTP for u in spec.urls()):
        systemca.apply()
    if spec.inventory:
        from gridxfer.testbed.inventory import load_inventory
        # URLs are resolved already; clients may have their own env
        with contextlib.suppress(GridxferError):
            os.environ.update(load_inventory().client_env())


@contextlib.contextmanager
def _signals(stop: threading.Event, hurry: threading.Event) -> Iterator[dict]:
    """SIGINT/SIGTERM set ``stop`` (a second one sets ``hurry``); restored afterwards."""
    seen: dict[str, Any] = {"signal": None}
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return

    def handler(signum: int, frame: Any) -> None:
        seen["signal"] = signal.Signals(signum).name
        (hurry if stop.is_set() else stop).set()

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield seen
    finally:
        for s, h in old.items():
            signal.signal(s, h)


# ------------------------------------------------------------------ plan / run / resume
def plan(spec: CampaignSpec, *, replace: bool = False) -> tuple[Path, int]:
    path, count, conn = _plan(spec, replace)
    conn.close()
    return path, count


def _plan(spec: CampaignSpec, replace: bool) -> tuple[Path, int, sqlite3.Connection]:
    """``plan``, the journal left open for the run (it was just written here, under the
    campaign's lock: reopening it would check every page again)."""
    path = preflight.may_plan(spec, replace)
    if path.exists():
        _sweep_old(path)
        _remove_journal(path)
    tiers = [(t.name, t.pool) for t in by_priority(spec.destinations)]
    rows = ((e.name, e.src_url, e.size, tier, e.adler32, refusal(e, pool))
            for e in _entries(spec) for tier, pool in tiers)
    try:
        conn = journal.connect(path, create=True)
    except BaseException:           # a full disk while creating it: keep no half journal
        _remove_journal(path)
        raise
    try:
        meta = {"name": spec.name, "spec": json.dumps(spec_to_dict(spec), sort_keys=True),
                "spec_path": spec.path, "created": repr(time.time()), "state": "planned"}
        if spec.job_metadata is not None:
            meta["job_metadata"] = spec.job_metadata      # FTS3's: shown by `report`
        meta.update([endpoint_names.meta_item(endpoint_names.assign(spec.urls(),
                                                                     dict(spec.names)))])
        with source_tokens(spec):           # the listing carries the source's token
            count = planning.plan(conn, meta, rows)
        if count == 0:
            raise preflight.no_files(spec)
    except BaseException:
        conn.close()
        _remove_journal(path)
        raise
    log.info("campaign %s planned: %d files in %s", spec.name, count, path)
    return path, count, conn


def source_tokens(spec: CampaignSpec) -> contextlib.AbstractContextManager:
    """This thread's requests to the source's server carry the source's token."""
    return movers_tokens.using(Credentials(spec).source_token(), spec.source.url, "")


def _entries(spec: CampaignSpec) -> Iterable[DatasetEntry]:
    """The source's files, those of a higher FTS3 ``priority`` first (journal ids are the
    dispatch order); a source without per-file priorities streams as listed."""
    prio = {f.name: f.priority for f in spec.source.files if f.priority is not None}
    if not prio:
        return expand(spec.source)
    return sorted(expand(spec.source), key=lambda e: -prio.get(e.name, spec.priority))


def _remove_journal(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{path}{suffix}")


def _sweep_old(path: Path) -> None:
    """Before --replace deletes a journal: remove the temporary and partial files it still
    records (best effort: a journal that cannot be read has nothing to offer)."""
    from gridxfer.campaign import reload as reload_mod
    try:
        conn = journal.connect(path, every_page=False)
    except GridxferError:
        return
    try:
        spec = reload_mod.journal_spec(path, journal.get_meta(conn))
        with movers_tokens.using_hosts(Credentials(spec).by_host()):
            sweep(conn, spec)
    except (GridxferError, sqlite3.Error):
        pass
    finally:
        conn.close()


def dry_run(spec: CampaignSpec, *, replace: bool = False, probe: bool = True,
            pairs: int = dryrun.PAIRS) -> CampaignResult:
    """The plan (``dryrun.py``): first pairs, counts per tier, every endpoint probed once;
    refused where `run` would refuse (no file, a journal of that name, a credential)."""
    preflight.refuse_tokens(spec)           # first, as in run_campaign
    path = preflight.may_plan(spec, replace)
    with source_tokens(spec):
        preflight.refuse_before_plan(spec)
        plan_ = dryrun.make_plan(spec, _entries(spec), pairs=pairs, probe=probe)
    n, size = (plan_.tiers[0].files, plan_.tiers[0].bytes) if plan_.tiers else (0, 0)
    if n == 0:
        raise preflight.no_files(spec)     # where `run` would stop, the dry run stops too
    k = len(spec.destinations)
    return CampaignResult(spec.name, str(path), "planned", n * k, 0, 0, size * k, 0, 0.0, 0.0,
                          dry_run=True, plan=plan_)


def run_campaign(spec_path: str | os.PathLike, *, dry: bool = False, replace: bool = False,
                 engine: str | None = None, fts3: str | None = None,
                 **kw: Any) -> CampaignResult:
    spec = engine_spec.override(load_spec(spec_path), engine, fts3)
    prepare_environment(spec)
    if dry:
        return dry_run(spec, replace=replace)
    with CampaignLock(spec.name):           # before plan: --replace deletes the journal
        preflight.refuse_tokens(spec)
        if spec.engine.kind == "local":     # logins while the source is listed
            sessions.connect_ahead(spec, ops_factory_for(kw.get("mover_factory"),
                                                         kw.get("ops_factory")))
        with source_tokens(spec):
            fts3_token = preflight.refuse_before_plan(spec, kw.get("ops_factory"))
        path, _, conn = _plan(spec, replace)
        return _execute(path, spec, conn, recovered=0, fts3_token=fts3_token, **kw)


def resume_campaign(name: str, *, mover_factory: Callable | None = None,
                    ops_factory: Callable | None = None, retry_failed: bool = False,
                    retry_cancelled: bool = False, reload: bool = False,
                    **kw: Any) -> CampaignResult:
    """Recover what a killed or interrupted run left (attempts, temporary files), then run
    what is pending. ``retry_failed``: failed files again (cancelled ones included);
    ``retry_cancelled``: the files `campaign cancel` marked. An edited campaign file is
    compared with the journal's spec (``reload.py``); ``reload`` applies its safe changes
    and refuses the file whole if any other is there."""
    from gridxfer.campaign import reload as reload_mod
    path = journal.journal_path(name)
    if not path.exists():
        raise UsageError(f"no such campaign journal: {path}")
    with CampaignLock(name):                # before recovery: one recovers, not two
        conn = journal.connect(path)
        try:
            meta = journal.get_meta(conn)
            spec = reload_mod.journal_spec(path, meta)
            edited = reload_mod.edits(name, meta, spec, reload)
            if reload and edited is not None:
                spec = reload_mod.apply(conn, name, edited)
            prepare_environment(spec)
            preflight.refuse_tokens(spec)
            if spec.engine.kind == "fts3":     # its active attempts are jobs on the server
                swept = Swept(0, 0)
            else:
                sessions.connect_ahead(spec, ops_factory_for(mover_factory, ops_factory))
                with movers_tokens.using_hosts(Credentials(spec).by_host()):  # token servers
                    swept = sweep(conn, spec, mover_factory, ops_factory)
            again = 0
            if retry_failed or retry_cancelled:
                again = conn.execute(
                    "UPDATE files SET state='pending', attempts=0, not_before=0, "
                    "error_class=NULL, error_msg=NULL WHERE state='failed'"
                    + ("" if retry_failed else " AND error_class=?"),
                    () if retry_failed else (CANCELLED,)).rowcount
            journal.add_event(conn, "resumed", recovered=swept.recovered,
                              removed=swept.removed, retry_failed=again)
        except BaseException:
            conn.close()
            raise
        res = _execute(path, spec, conn, recovered=swept.recovered, cleaned=swept.removed,
                       mover_factory=mover_factory, ops_factory=ops_factory, **kw)
    return dataclasses.replace(res, edited=edited.to_dict() if edited else None,
                               reloaded=bool(reload and edited))


def _execute(path: Path, spec: CampaignSpec, conn: sqlite3.Connection, *, recovered: int,
             cleaned: int | None = None, observers: Sequence[Observer] = (),
             fts3_token: object = fts3_client.UNREAD, **factories: Any) -> CampaignResult:
    """Run the planned or recovered journal ``conn`` (this process opened and checked it,
    under the campaign's lock); it is closed at the end."""
    try:
        journal.set_meta(conn, [("pid", str(os.getpid()))])
        if spec.engine.kind == "fts3":
            return _execute_fts3(conn, path, spec, recovered, observers, fts3_token)
        sched = Scheduler(conn, spec, observers=observers, **factories)
        log.info("campaign %s: dispatching (pid %d)", spec.name, os.getpid())
        with _signals(sched.stop, sched.hurry):
            res = sched.run()
        log.info("campaign %s: %s after %.1f s", spec.name, res.state, res.seconds)
        out = results.from_scheduler(conn, path, spec.name, res, recovered, cleaned)
        if res.state == "interrupted" and sched.tokens.paused:
            out = replace(out, paused=redact(sched.tokens.message()))
        return out
    finally:
        conn.close()


def _execute_fts3(conn: sqlite3.Connection, path: Path, spec: CampaignSpec,
                  recovered: int, observers: Sequence[Observer] = (),
                  token: object = fts3_client.UNREAD) -> CampaignResult:
    """The campaign handed to FTS3 (campaign/fts3): Ctrl-C stops polling, not the jobs."""
    from gridxfer.campaign.fts3 import run as fts3_run
    stop, hurry = threading.Event(), threading.Event()
    with _signals(stop, hurry):
        run = fts3_run.run(conn, spec, stop, observers=observers, token=token)
    t = fts3_run.totals(conn)
    return CampaignResult(spec.name, str(path), run.state, t.files, t.done, t.failed, t.bytes,
                          t.bytes_done, round(run.seconds, 3),
                          t.bytes_done / max(run.seconds, 1e-3), recovered, results.failures(conn),
                          cancelled=journal.count_cancelled(conn), paused=redact(run.paused))
