"""Job ids across `run --replace` and a journal that lost its job records (on the FTS3
STAND-IN, which answers 409 to a job id it has, as fts-rest does).

Job ids are deterministic (uuid5 of the campaign, tier, round and files): a resume must find
the jobs of its own journal, but the same campaign planned again by `run --replace` is new
work. Before the fix both cases ended in "FTS3 submission: Client error: 409" (exit 1)."""
from __future__ import annotations

import sqlite3
from pathlib import Path


from gridxfer.cli.main import main


def campaign(tmp_path: Path, url: str, token: str) -> Path:
    tok = tmp_path / "tok"
    tok.write_text(token)
    tok.chmod(0o600)
    files = "".join(f"  - {{name: d/f{i}, size: 1000}}\n" for i in range(5))
    f = tmp_path / "c.yaml"
    f.write_text(f'campaign: again\nengine: fts3\nfts3: {{endpoint: "{url}", token: '
                 f'{{file: "{tok}"}}}}\nsource:\n  url: "root://s.example//d/"\n  files:\n'
                 f'{files}destinations:\n  - {{tier: t, pool: ["root://d.example//x/"]}}\n')
    return f


def done(home: Path) -> int:
    conn = sqlite3.connect(home / "campaigns" / "again.sqlite")
    try:
        return conn.execute("SELECT count(*) FROM files WHERE state='done'").fetchone()[0]
    finally:
        conn.close()


def test_run_replace_submits_the_campaign_again_as_new_jobs(tmp_path, gridxfer_home, standin,
                                                           jwt, capsys):
    spec = campaign(tmp_path, standin.url, jwt)
    assert main(["campaign", "run", "--quiet", str(spec)]) == 0
    first = set(standin.jobs)
    assert main(["campaign", "run", "--quiet", "--replace", str(spec)]) == 0, \
        capsys.readouterr().err
    assert len(standin.jobs) == 2 * len(first) and first < set(standin.jobs)
    assert done(gridxfer_home) == 5


def test_a_job_the_server_has_under_its_id_is_taken_not_posted_twice(tmp_path, gridxfer_home,
                                                                     standin, jwt, capsys):
    """The journal lost its job records (its files pending again): the jobs it posts are
    the ones the server has (409), taken as submitted and polled to the end."""
    spec = campaign(tmp_path, standin.url, jwt)
    assert main(["campaign", "run", "--quiet", str(spec)]) == 0
    jobs = dict(standin.jobs)
    conn = sqlite3.connect(gridxfer_home / "campaigns" / "again.sqlite")
    with conn:
        conn.execute("DELETE FROM fts3_jobs")
        conn.execute("UPDATE files SET state='pending'")
    conn.close()
    assert main(["campaign", "resume", "--quiet", "again"]) == 0, capsys.readouterr().err
    assert set(standin.jobs) == set(jobs)          # nothing posted as a new job
    assert done(gridxfer_home) == 5
