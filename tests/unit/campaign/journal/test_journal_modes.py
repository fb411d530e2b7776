"""Journal and lock file modes: 0600, or 0640 in a set-group-ID campaigns directory (the
admin shares it with the nagios group: README "Monitoring")."""
from __future__ import annotations

import os
import stat

import pytest

from gridxfer.campaign.journal import store
from gridxfer.campaign.journal.lock import CampaignLock


@pytest.mark.parametrize("setgid,mode", [(False, 0o600), (True, 0o640)])
def test_journal_and_lock_follow_the_directory(gridxfer_home, setgid, mode):
    campaigns = store.journal_dir()
    if setgid:
        os.chmod(campaigns, 0o2750)
    conn = store.connect(store.journal_path("m1"), create=True)
    conn.execute("INSERT INTO meta VALUES ('k', 'v')")
    with CampaignLock("m1"):
        found = {p.name: stat.S_IMODE(p.stat().st_mode) for p in campaigns.iterdir()}
    conn.close()
    assert found == {"m1.sqlite": mode, "m1.sqlite-wal": mode, "m1.sqlite-shm": mode,
                     "m1.lock": mode}
