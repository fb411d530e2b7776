"""A campaign's files as FTS3 jobs: the field mapping (issue 23's table) and the split.

Each job is what the official client's ``fts3.rest.client.easy.new_job`` returns, built
from ``new_transfer`` entries, so the request the server sees is the client's own. Files
are grouped per (tier, source storage, destination endpoint) and cut into jobs of at most
``MAX_FILES`` (FTS3 and Rucio use 200). A job whose files are all small
(``SMALL_FILE``, fts-rest's ``AutoSessionReuseMaxSmallFileSize``) asks for ``reuse``: one
source and one destination endpoint, as the server requires for a reuse job.

The campaign's name and each file's journal id travel in ``job_metadata`` and each file's
``metadata``. A file whose source or destination has a ``token:`` carries both per file, as
the official client's ``new_transfer`` sends them (``source_tokens``/``destination_tokens``,
one per source/destination, fts-rest's JobBuilder); ``without_tokens`` is the body the
journal keeps (never a token in it). ``sid`` (with the deterministic id generator)
makes the job id a function of the campaign, the tier, the files and the round, so a
resume can ask the server whether a job it may not have journalled exists (``engine``).
"""
from __future__ import annotations

import hashlib
import json
import copy
import uuid
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Iterable, Sequence

from gridxfer.campaign.fts3 import official
from gridxfer.campaign.spec.model import CampaignSpec, TierSpec
from gridxfer.movers.base import TokenPair

# fts-rest's namespace of deterministic job ids: uuid5(uuid5(BASE_ID, vo), sid)
BASE_ID = uuid.UUID("urn:uuid:01874efb-4735-4595-bc9c-591aef8240c9")
MAX_FILES = 200                 # files per job (FTS3's and Rucio's practice)
SMALL_FILE = 104_857_600        # bytes: fts-rest's AutoSessionReuseMaxSmallFileSize
_VERIFY = {"source": "source", "destination": "target", "both": "both", "none": "none"}


@dataclass(frozen=True)
class FileRow:
    """One journal file placed on an endpoint, ready to be handed to FTS3."""
    file_id: int
    src_url: str
    dst_url: str
    endpoint: str
    tier: str
    size: int
    adler32: str | None = None
    activity: str | None = None
    priority: int | None = None     # the file's own (FTS3 priority is per job: grouped by it)
    tokens: TokenPair | None = field(default=None, repr=False)   # never shown


@dataclass(frozen=True)
class JobPlan:
    sid: str                    # the deterministic job id's seed
    tier: str
    endpoint: str
    file_ids: tuple[int, ...]
    job: dict[str, Any]         # easy.new_job's dict: submitted as is


def storage_element(url: str) -> str:
    """fts-rest's ``get_storage_element``: scheme://host, without the port."""
    from urllib.parse import urlsplit
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}"


def verify_checksum(spec: CampaignSpec) -> str:
    """The job's verify_checksum. Always explicit: left out (False), the server makes a
    job with an ADLER32 checksum ``target`` (fts-rest ``_check_checksum``)."""
    if spec.checksum.algorithm is None:
        return "none"
    return _VERIFY[spec.checksum.verify]


def job_metadata(spec: CampaignSpec, tier: str, round_: int) -> dict[str, Any]:
    meta: dict[str, Any] = {"gridxfer_campaign": spec.name, "tier": tier, "round": round_}
    if spec.job_metadata is not None:
        meta["user"] = json.loads(spec.job_metadata)
    return meta


def _transfer(spec: CampaignSpec, row: FileRow) -> dict[str, Any]:
    checksum: str | None = f"ADLER32:{row.adler32}" if row.adler32 else "ADLER32"
    if spec.checksum.algorithm is None:
        checksum = None
    # fts-rest takes both token lists or none (a 400 for one: checked on the real server);
    # the engine gives a side without ``token:`` the FTS3 access token (tokens.FileTokens.of)
    tok = row.tokens or TokenPair()
    both = {"source_token": tok.src, "destination_token": tok.dst} if tok.src and tok.dst \
        else {}
    transfer: dict[str, Any] = official.easy().new_transfer(
        row.src_url, row.dst_url, checksum=checksum, filesize=row.size,
        activity=row.activity or spec.activity,
        metadata={"gridxfer_campaign": spec.name, "file_id": row.file_id}, **both)
    return transfer


TOKEN_KEYS = ("source_tokens", "destination_tokens")


def without_tokens(job: dict[str, Any]) -> dict[str, Any]:
    """``job`` with every per-file token left out: what the journal may keep."""
    out = copy.deepcopy(job)
    for f in out.get("files", []):
        for key in TOKEN_KEYS:
            f.pop(key, None)
    return out


def priority(spec: CampaignSpec, tier: TierSpec, row: FileRow) -> int:
    """The file's, else its tier's (when set), else the campaign's (default 3)."""
    if row.priority is not None:
        return row.priority
    return tier.priority if tier.priority != 3 else spec.priority


def _params(spec: CampaignSpec, tier: TierSpec, reuse: bool, prio: int) -> dict[str, Any]:
    staging = spec.source.bring_online
    # the campaign's retries are gridxfer's: FTS3 is told none (-1), and a failed file
    # comes back to gridxfer, which resubmits it (to another endpoint where it may)
    return dict(
        verify_checksum=verify_checksum(spec), reuse=True if reuse else None,
        overwrite=spec.overwrite, retry=-1, retry_delay=0,
        priority=prio, nostreams=tier.streams,
        timeout=int(spec.timeout),
        archive_timeout=int(tier.archive_timeout) if tier.archive_timeout else None,
        bring_online=int(staging.timeout) if staging else None,
        copy_pin_lifetime=int(staging.pin_lifetime) if staging else None)


def sid_of(spec: CampaignSpec, tier: str, round_: int, file_ids: Sequence[int],
           plan_id: str = "") -> str:
    """The deterministic job id's seed. ``plan_id`` (the journal's, from when it was planned)
    keeps it the same across resumes of one journal, and new after ``run --replace``: the
    same campaign planned again is new jobs (the server answers 409 to an id it has)."""
    digest = hashlib.sha256(",".join(map(str, file_ids)).encode()).hexdigest()[:24]
    return f"gridxfer:{spec.name}:{plan_id}{':' if plan_id else ''}{tier}:{round_}:{digest}"


def _reuse(spec: CampaignSpec, chunk: Sequence[FileRow]) -> bool:
    if spec.engine.reuse == "never" or len(chunk) < 2:
        return False
    return spec.engine.reuse == "always" or all(r.size <= SMALL_FILE for r in chunk)


def build(spec: CampaignSpec, rows: Iterable[FileRow], round_: int = 0,
          plan_id: str = "") -> list[JobPlan]:
    """The jobs for ``rows`` (already placed): one group per (tier, source storage,
    destination endpoint, priority, small or not), cut at ``MAX_FILES``."""
    groups: dict[tuple[str, str, str, int, bool], list[FileRow]] = {}
    for row in rows:
        prio = priority(spec, spec.tier(row.tier), row)
        small = spec.engine.reuse == "auto" and row.size <= SMALL_FILE
        key = (row.tier, storage_element(row.src_url), row.endpoint, prio, small)
        groups.setdefault(key, []).append(row)
    plans: list[JobPlan] = []
    for (tier_name, _, endpoint, prio, _small), members in groups.items():
        tier = spec.tier(tier_name)
        for start in range(0, len(members), MAX_FILES):
            chunk = members[start:start + MAX_FILES]
            ids = tuple(r.file_id for r in chunk)
            reuse = _reuse(spec, chunk)
            sid = sid_of(spec, tier_name, round_, ids, plan_id)
            easy = official.easy()
            job = easy.new_job(
                [_transfer(spec, r) for r in chunk],
                metadata=job_metadata(spec, tier_name, round_),
                id_generator=easy.JobIdGenerator.deterministic, sid=sid,
                **_params(spec, tier, reuse, prio))
            plans.append(JobPlan(sid, tier_name, endpoint, ids, job))
    return plans
