"""Which edits of a campaign file a started campaign takes (campaign/reload.py)."""
from __future__ import annotations

from dataclasses import replace

from gridxfer.campaign.reload import diff
from gridxfer.campaign.spec.model import (CampaignSpec, ChecksumSpec, CircuitSpec, RetrySpec,
                                          SourceSpec, TierSpec, TokenSpec)

BASE = CampaignSpec("c", SourceSpec("root://h//s/", glob="*"),
                    (TierSpec("T1", ("root://a//d/", "root://b//d/"), max_active=4),),
                    path="/x/c.yaml")


def _fields(new: CampaignSpec) -> dict[str, bool]:
    return {c.field: c.safe for c in diff(BASE, new)}


def test_safe_edits():
    tier = replace(BASE.destinations[0], max_active=8, min_active=2, streams=4,
                   tcp_buffer=1 << 22, token=TokenSpec(file="/run/tok"), selector="round-robin",
                   priority=5)
    new = replace(BASE, overwrite=True, retries=RetrySpec(5, 10.0), timeout=60.0,
                  destinations=(tier,), job_metadata='{"a": 1}',
                  source=replace(BASE.source, token=TokenSpec(env="BEARER")),
                  circuit_breaker=CircuitSpec(30.0, 600.0), pool_down_wait=60.0,
                  activity="Express", activity_shares=(("Express", 2.0),))
    got = _fields(new)
    assert all(got.values()), got
    assert {"overwrite", "retries.max", "retries.backoff", "timeout", "job_metadata",
            "destinations[T1].max_active", "destinations[T1].min_active",
            "destinations[T1].streams", "destinations[T1].tcp_buffer",
            "destinations[T1].token.file", "source.token.env", "destinations[T1].selector",
            "destinations[T1].priority", "circuit_breaker.cooldown", "pool_down_wait",
            "activity", "activity_shares"} <= set(got), got


def test_refused_edits_and_their_reasons():
    tier = replace(BASE.destinations[0], pool=("root://a//d/",))
    new = replace(BASE, source=replace(BASE.source, glob="*.root"), destinations=(
        tier, TierSpec("T2", ("root://c//d/",))), checksum=ChecksumSpec(verify="source"),
        third_party=True, priority=5)
    changes = {c.field: c for c in diff(BASE, new)}
    assert set(changes) == {"source.glob", "destinations[T1].pool", "priority",
                            "destinations[T2]", "checksum.verify", "third_party"}
    assert not any(c.safe for c in changes.values())
    assert "planned from the old source" in changes["source.glob"].reason
    assert "placed on the old pool" in changes["destinations[T1].pool"].reason
    assert "a tier added or removed" in changes["destinations[T2]"].reason
    assert "verified the old way" in changes["checksum.verify"].reason
    assert "old priority order" in changes["priority"].reason
    assert all("run FILE --replace" in c.reason for c in changes.values())


def test_the_file_path_is_no_change():
    assert diff(BASE, replace(BASE, path="/elsewhere/c.yaml", inventory=True)) == ()
