"""gridxfer.redact: what is masked, what is left alone, and the refusals that use it."""
from __future__ import annotations

import json

import pytest

from gridxfer.campaign.journal import planning, store as journal
from gridxfer.campaign.engine import ledger
from gridxfer.campaign.spec.schema import load_spec
from gridxfer.errors import SpecError
from gridxfer.redact import credential_in_url, redact, redact_obj

MASKED = [
    ("root://bob:hunter2@host//x", "root://bob:***@host//x"),
    ("root://bob:p@ss@host//x", "root://bob:***@host//x"),
    ("ftp://:hunter2@h/x", "ftp://:***@h/x"),
    ("https://h/f?authz=Bearer%20hunter2&x=1", "https://h/f?authz=***&x=1"),
    ("root://h//f?xrd.gsiusrpxy=/tmp/x509up_u0", "root://h//f?xrd.gsiusrpxy=***"),
    ("f.root%3Faccess_token%3Dhunter2", "f.root%3Faccess_token%3D***"),
    ("https://s3/b/k?X-Amz-Signature=hunter2", "https://s3/b/k?X-Amz-Signature=***"),
    ("error: Authorization: Bearer hunter2xyz", "error: Authorization: ***"),
    ("error: bearer hunter2xyz", "error: bearer ***"),
    ("tok eyJhbGciOi.eyJzdWIiOi.hunter2", "tok ***"),
    ("key -----BEGIN RSA PRIVATE KEY-----\nhunter2\n-----END RSA PRIVATE KEY-----\nend",
     "key -----BEGIN RSA PRIVATE KEY----- ***\nend"),
    # only the secret: the punctuation after it belongs to the text and stays
    ("copy root://h//f?authz=hunter2, retrying", "copy root://h//f?authz=***, retrying"),
    ("(see token=hunter2).", "(see token=***)."),
    ("failed: root://h//f?authz=hunter2; giving up", "failed: root://h//f?authz=***; giving up"),
    ("root://h//f?authz=hun,ter2 x", "root://h//f?authz=*** x"),
    ("root://h//f?authz=hunter2,,", "root://h//f?authz=***,,"),
]
KEPT = ["root://gx3p1@host:1094//data/f", "root://host:1094//data/x@y", "my_token=abc",
        "plain 3=4", "gsiftp://se01.cnaf.example/data/", ""]


@pytest.mark.parametrize("text,want", MASKED)
def test_masks_credentials(text, want):
    assert redact(text) == want
    assert "hunter2" not in redact(text)


@pytest.mark.parametrize("text", KEPT)
def test_leaves_the_rest_alone(text):
    assert redact(text) == text and credential_in_url(text) is None


def test_redacting_json_text_keeps_it_json():
    doc = json.dumps({"u": "root://a:hunter2@h//x", "m": 'authz=hun"ter2 \\ x', "k": [1]})
    assert json.loads(redact(doc)) == {"u": "root://a:***@h//x", "m": 'authz=***"ter2 \\ x',
                                       "k": [1]}
    assert redact_obj({"root://a:b@h/": ("authz=q", 3)}) == {"root://a:***@h/": ("authz=***", 3)}


def _spec_text(url: str) -> str:
    return (f"campaign: c\nsource: {{url: \"file:///src/\", files: {{glob: \"*\"}}}}\n"
            f"destinations:\n  - tier: T1\n    pool: [\"{url}\"]\n")


@pytest.mark.parametrize("url,what", [("root://bob:hunter2@host//x/", "a password"),
                                      ("https://h/d/?access_token=hunter2", "access_token="),
                                      ("root://h//d/?authz=hunter2", "authz=")])
def test_campaign_file_refuses_credentials_in_urls(tmp_path, url, what):
    path = tmp_path / "c.yaml"
    path.write_text(_spec_text(url))
    with pytest.raises(SpecError) as err:
        load_spec(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}:5: destinations[0].pool[0]: the URL ") and what in msg
    assert "X509_USER_PROXY" in msg and "BEARER_TOKEN" in msg and "hunter2" not in msg


def test_list_file_refuses_a_name_with_a_credential(tmp_path):
    (tmp_path / "list.txt").write_text("a.root 10\nb.root?authz=hunter2 20\n")
    path = tmp_path / "c.yaml"
    path.write_text(_spec_text("root://h//d/").replace('{glob: "*"}', "{from: list.txt}"))
    from gridxfer.campaign.spec.dataset import expand
    with pytest.raises(SpecError) as err:
        list(expand(load_spec(path).source))
    msg = str(err.value)
    want = f"{tmp_path / 'list.txt'}:2: name: the name carries the credential authz="
    assert msg.startswith(want)
    assert "hunter2" not in msg


def test_journal_writes_are_redacted(tmp_path):
    path = tmp_path / "j.sqlite"
    conn = journal.connect(path, create=True)
    planning.plan(conn, {"name": "j", "spec": json.dumps({"u": "root://b:hunter2@h//"})},
                 [("ok.root", "file:///s/ok.root", 1, "T1", None),
                  ("x?authz=hunter2", "file:///s/x?authz=hunter2", 2, "T1", None),
                  ("y%3Ftoken%3Dhunter2", "file:///s/y%253Ftoken%253Dhunter2", 3, "T1", None)])
    b = ledger.Batch()
    b.attempts.append((1, 1, "T1", "root://h//d/", "root://h//d/ok.root", 0.0, 1,
                       "root://h//d/.ok.root.gxpart-1?authz=hunter2"))
    b.att_rows.append(("failed", 1.0, 0, 0.0, 1, "x", "other",
                       "open root://h//d/ok.root?authz=hunter2 failed",
                       "root://h//d/.ok.root.gxpart-1?authz=hunter2", 1))
    b.events.append(("excluded", {"url": "root://b:hunter2@h//", "reason": "bearer hunter2xx"}))
    ledger.record(conn, b, 1.0)
    rows = {r["name"]: (r["state"], r["error_class"]) for r in
            conn.execute("SELECT name, state, error_class FROM files")}
    conn.close()
    assert rows == {"ok.root": ("pending", None), "x?authz=***": ("failed", "permission"),
                    "y%3Ftoken%3D***": ("failed", "permission")}
    for suffix in ("", "-wal"):
        data = (tmp_path / f"j.sqlite{suffix}").read_bytes() if (
            tmp_path / f"j.sqlite{suffix}").exists() else b""
        assert b"hunter2" not in data


def test_runner_refuses_a_spec_built_in_python(gridxfer_home):
    from gridxfer.campaign.runner import plan
    from gridxfer.campaign.spec.model import CampaignSpec, SourceSpec, TierSpec
    from gridxfer.errors import UsageError
    spec = CampaignSpec("c", SourceSpec("file:///s/", glob="*"),
                        (TierSpec("T1", ("root://bob:hunter2@h//d/",)),))
    with pytest.raises(UsageError, match=r"carries a password") as err:
        plan(spec)
    assert "hunter2" not in str(err.value)
    assert not journal.journal_path("c").exists()


def test_globus_url_copy_never_gets_a_credential_in_argv():
    from gridxfer.errors import TransferError
    from gridxfer.movers.base import TransferParams
    from gridxfer.movers.gridftp.globus import GlobusUrlCopyMover
    mover = GlobusUrlCopyMover(binary="/bin/false-never-run")
    with pytest.raises(TransferError) as err:
        mover._run(["globus-url-copy", "file:///tmp/a", "ftp://bob:hunter2@h/b"],
                   TransferParams(), None, remote_src=False)
    assert err.value.error_class.value == "permission" and "hunter2" not in str(err.value)


def test_perfdata_and_prometheus_names_are_redacted():
    from gridxfer.monitoring.plugintext import one_line, perf_label
    from gridxfer.monitoring.prometheus import Sample, render
    assert "hunter2" not in perf_label("ep_root://bob:hunter2@h//d/_MBps")
    assert "hunter2" not in one_line(RuntimeError("stat root://h//f?authz=hunter2: denied"))
    text = render([Sample("m", 1.0, {"endpoint": "root://bob:hunter2@h//d/"})])
    assert "hunter2" not in text and 'endpoint="root://bob:***@h//d/"' in text


def test_inventory_with_a_credential_is_refused(tmp_path):
    from gridxfer.testbed.inventory import Endpoint, Inventory, load_inventory
    from gridxfer import state
    ep = Endpoint("t1-xrd", "root://bob:hunter2@127.0.0.1:1094//data/", "root", "T1", "/d", 1, "l")
    path = tmp_path / "inventory.json"
    state.write_json(path, Inventory("local", {"t1-xrd": ep}, {}, str(tmp_path)).to_json())
    with pytest.raises(SpecError) as err:
        load_inventory(path)
    assert str(err.value).startswith(f"{path}: endpoints.t1-xrd.url: the URL ")
    assert err.value.exit_code == 2 and "hunter2" not in str(err.value)


@pytest.mark.parametrize("text, shown", [
    ("--host 'ssh:alice:hunter2@127.0.0.1:1': expected ssh:[USER@]HOST[:PORT]",
     "--host 'ssh:alice:***@127.0.0.1:1': expected ssh:[USER@]HOST[:PORT]"),
    ("TUNING UNKNOWN - --host 'SSH:alice:hunter2@h'", "TUNING UNKNOWN - --host 'SSH:alice:***@h'"),
    ("-H 'u:hunter2@127.0.0.1'", "-H 'u:***@127.0.0.1'"),
    ("u:hunter2@[::1]", "u:***@[::1]"),
    ("ssh:alice@h:22 and ssh:h", "ssh:alice@h:22 and ssh:h"),     # a login name stays
    ("at 10:30 on h, size=1:2", "at 10:30 on h, size=1:2"),
])
def test_a_password_before_an_at_sign_is_masked_without_a_scheme_too(text, shown):
    assert redact(text) == shown
