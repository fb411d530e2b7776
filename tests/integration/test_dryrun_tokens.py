"""`campaign run --dry-run` against token-protected servers (the testbed's t2-tok1: XRootD
5.5.3 with ztn and the SciTokens plugin, root:// and its XrdHttp davs:// t2-davs1; scopes
relative to /data): the probes carry the tokens the run's transfers would get (the
campaign's ``token:``), so where the run succeeds the dry run says so too, and a token
without the scope the run needs is flagged before anything is planned. No probe file is
left, and no token appears in the output."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gridxfer.testbed import tokens as tok_mod

from tests.integration.test_campaign_tokens import (PROTOCOLS, campaign_file, env_for,
                                                    gridxfer, on_disk, write_token)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def issuer(auth_grid):
    return tok_mod.load_issuer(Path(auth_grid.extra["issuer"]))


def _campaign(tmp_path: Path, name: str, dst: str, token: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    for i in range(3):
        (src / f"f{i}.dat").write_bytes(os.urandom(10_000 + i))
    return campaign_file(tmp_path, name, src, dst, str(token))


@pytest.mark.parametrize("proto", sorted(PROTOCOLS))
@pytest.mark.parametrize("modify", [True, False], ids=["create-modify", "create-only"])
def test_dry_run_probes_with_the_campaign_token_and_agrees_with_the_run(
        auth_grid, issuer, tmp_path, proto, modify):
    """A token that may delete gets a probe file written and deleted; an upload token
    (create, no modify) none: it would stay behind. Both: the endpoint is fine, as for
    the run (which needs no more than storage.create and, for gfal2's stat, storage.read)."""
    d = f"dry-{proto}-{modify}"
    tok = tmp_path / "tok"
    value = tok_mod.mint(issuer, [f"storage.create:/{d}", f"storage.read:/{d}"]
                         + ([f"storage.modify:/{d}"] if modify else []))
    write_token(tok, value)
    spec = _campaign(tmp_path, d, auth_grid.resolve(f"{PROTOCOLS[proto]}/{d}/"), tok)
    env = env_for(auth_grid, tmp_path / "home")
    dry = gridxfer(env, "campaign", "run", "--dry-run", "--json", str(spec))
    sig = value.rsplit(".", 1)[1]
    assert sig not in dry.stdout + dry.stderr
    assert dry.returncode == 0, dry.stdout + dry.stderr
    probe = next(p for p in json.loads(dry.stdout)["run"]["plan"]["probes"]
                 if p["role"] == "T2")
    assert probe["problem"] == "" and probe["reachable"] is True
    assert probe["writable"] is (True if modify else None)
    left = list(on_disk(auth_grid, d).iterdir()) if on_disk(auth_grid, d).exists() else []
    assert not [p.name for p in left if "probe" in p.name], left     # no probe file left
    run = gridxfer(env, "campaign", "run", "--quiet", str(spec))
    assert run.returncode == 0, run.stdout + run.stderr                # as the dry run said
    # the copies are there now, overwrite off: its stat (with the token) finds them
    again = gridxfer(env, "campaign", "run", "--dry-run", "--replace", str(spec))
    assert again.returncode == 3, again.stdout + again.stderr
    assert "EXISTS" in again.stdout and "exist and overwrite is off" in again.stderr


@pytest.mark.parametrize("proto", sorted(PROTOCOLS))
def test_dry_run_flags_a_token_without_the_scope_the_run_needs(auth_grid, issuer, tmp_path,
                                                               proto):
    d = f"dry-ro-{proto}"
    tok = tmp_path / "tok"
    write_token(tok, tok_mod.mint(issuer, [f"storage.read:/{d}"]))
    spec = _campaign(tmp_path, d, auth_grid.resolve(f"{PROTOCOLS[proto]}/{d}/"), tok)
    env = env_for(auth_grid, tmp_path / "home")
    dry = gridxfer(env, "campaign", "run", "--dry-run", str(spec))
    assert dry.returncode == 3, dry.stdout + dry.stderr
    assert f"lacks storage.create:/{d}/" in dry.stdout, dry.stdout
    run = gridxfer(env, "campaign", "run", "--quiet", str(spec))
    assert run.returncode == 3, run.stdout + run.stderr                # as the dry run said
