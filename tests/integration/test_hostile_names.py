"""Hostile file names on real servers (issue 17): XRootD upload and download, GridFTP
both ways (gridxfer's own client, globus-url-copy, gfal2), local files. Every legal name
arrives with its own bytes under its own name; every other one fails alone with class
bad_name; nothing outside the campaign's source and destination directories is read or
written (canaries sit where a decoded '..' would land)."""
from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import stat
from pathlib import Path

import pytest

from gridxfer.cli.main import main

pytestmark = pytest.mark.integration

# legal everywhere; "a?b" is legal except on root:// (XRootD reads it as CGI)
LEGAL = ["a#b", "a%2fb", "%2f%2e%2e%2fsecret", "a b", "ü.root", "x%3fy", "-rf", "data.root",
         "a%2f..%2f..%2fsecret"]
QUESTION = ["a?b", "data.root?oss.asize=5"]
CANARY = b"CANARY: never read, never written\n"


def content(name: str) -> bytes:
    return f"payload of {name!r}\n".encode() + hashlib.sha256(name.encode()).digest() * 50


def make_tree(root: Path, names: list[str]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)
    for n in names:
        (root / n).write_bytes(content(n))
        os.chmod(root / n, 0o644)


def plant_canaries(*dirs: Path) -> list[Path]:
    """'secret' where '<dir>/../secret' and '<dir>/../../secret' land, and an 'a/b'."""
    out = []
    for d in dirs:
        for c in (d.parent / "secret", d.parent.parent / "secret"):
            if not c.exists():
                c.parent.mkdir(parents=True, exist_ok=True)
                c.write_bytes(CANARY)
                os.chmod(c, 0o644)
            out.append(c)
    return out


def snapshot(*roots: Path) -> dict[str, tuple[int, str]]:
    out = {}
    for root in roots:
        for dirpath, _dirs, files in os.walk(root):
            for f in files:
                p = Path(dirpath) / f
                if ".gxpart-" in f or p.suffix in (".sqlite", ".sqlite-wal", ".sqlite-shm"):
                    continue
                with contextlib.suppress(OSError):
                    out[str(p)] = (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def rows(home: Path, campaign: str) -> list[sqlite3.Row]:
    conn = sqlite3.connect(home / "campaigns" / f"{campaign}.sqlite")
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute("SELECT * FROM files ORDER BY id").fetchall()
    finally:
        conn.close()


def run_campaign(tmp_path: Path, campaign: str, source: str, tiers: list[tuple[str, str, int]],
                 capsys, expect: int = 3) -> str:
    pools = "\n".join(f"  - {{tier: {t}, pool: [\"{url}\"], streams: {s}, max_active: 2}}"
                      for t, url, s in tiers)
    spec = tmp_path / "specs" / f"{campaign}.yaml"       # outside the watched area
    spec.parent.mkdir(exist_ok=True)
    spec.write_text(f"campaign: {campaign}\nsource: {{url: \"{source}\", files: {{glob: \"*\"}}}}\n"
                    f"destinations:\n{pools}\nretries: {{max: 1, backoff: 0.1s}}\ntimeout: 60s\n")
    code = main(["campaign", "run", "--quiet", str(spec)])
    out = capsys.readouterr()
    assert code == expect, out.err + out.out   # the bad names failed, the others are done
    return out.out


def check_outcome(home: Path, campaign: str, dst_dirs: dict[str, Path], legal: dict[str, set[str]],
                  names: list[str]) -> None:
    by = {(r["tier"], r["name"]): r for r in rows(home, campaign)}
    for tier, d in dst_dirs.items():
        good = legal[tier]
        for n in names:
            r = by[(tier, n)]
            if n in good:
                assert r["state"] == "done", (tier, n, dict(r))
                assert (d / n).read_bytes() == content(n), (tier, n)
            else:
                assert (r["state"], r["error_class"]) == ("failed", "bad_name"), (tier, n, dict(r))
                assert r["attempts"] <= 1
        # exactly the legal names, each under its own name: nothing decoded, nothing cut
        assert sorted(p.name for p in d.iterdir()) == sorted(good), tier


def assert_only_destinations_changed(before: dict, after: dict, dst_dirs, canaries) -> None:
    for c in canaries:
        assert c.read_bytes() == CANARY, c
    changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)}
    outside = [p for p in changed if not any(p.startswith(str(d) + "/") for d in dst_dirs)]
    assert outside == [], outside


def assert_status_and_report_show(campaign: str, bad: str, capsys) -> None:
    assert main(["campaign", "report", campaign]) == 0
    out = capsys.readouterr().out
    assert f"{bad}: bad_name: bad file name" in out, out
    assert main(["campaign", "status", campaign]) == 0
    assert " failed" in capsys.readouterr().out


def test_upload_hostile_names_to_xrootd_gridftp_and_local(local_grid, local_grid_home, tmp_path,
                                                          capsys):
    """file -> root:// (XrdCl), gsiftp:// with one stream (gridxfer's GridFTP client) and
    two (globus-url-copy), file:// (gfal2). The source file '%2f%2e%2e%2fsecret' is itself;
    globus-url-copy once read '<src>/../secret' for it."""
    os.chmod(tmp_path, 0o755)
    area = tmp_path / "area" / "in"
    src = area / "src"
    names = LEGAL + QUESTION + ["bad\nname", "ctl\x01x"]
    make_tree(src, names)
    xrd, gs = (Path(local_grid.endpoints[e].data_dir) for e in ("t1a-xrd1", "t1a-gsiftp"))
    dst = {"XRD": xrd / "hn-up" / "d", "GS1": gs / "hn-up1" / "d", "GS2": gs / "hn-up2" / "d",
           "LOC": area / "dst" / "d"}
    for d in (xrd / "hn-up", gs / "hn-up1", gs / "hn-up2"):
        d.mkdir(exist_ok=True)
        os.chmod(d, 0o777)
    canaries = plant_canaries(src, *dst.values())
    before = snapshot(tmp_path / "area", xrd, gs)
    out = run_campaign(tmp_path, "hn-up", f"file://{src}/", [
        ("XRD", "t1a-xrd1/hn-up/d/", 1), ("GS1", "t1a-gsiftp/hn-up1/d/", 1),
        ("GS2", "t1a-gsiftp/hn-up2/d/", 2), ("LOC", f"file://{dst['LOC']}/", 1)], capsys)
    assert "FAILED XRD a?b: bad_name" in out and "bad\\nname" in out
    legal = {t: set(LEGAL + QUESTION) for t in dst}
    legal["XRD"] = set(LEGAL)
    check_outcome(local_grid_home, "hn-up", dst, legal, names)
    assert_only_destinations_changed(before, snapshot(tmp_path / "area", xrd, gs),
                                     dst.values(), canaries)
    assert_status_and_report_show("hn-up", "ctl\\x01x", capsys)
    assert_normal_mode(dst["LOC"])


@pytest.mark.parametrize("endpoint", ["t0-xrd", "t0-gsiftp"])
def test_download_hostile_names(local_grid, local_grid_home, tmp_path, capsys, endpoint):
    """root:// and gsiftp:// -> file:// with names from the server's own listing: the
    XRootD file 'data.root?oss.asize=5' is never read as 'data.root' (class bad_name), the
    GridFTP file '%2f%2e%2e%2fsecret' is not written as '<dst>/../secret'."""
    os.chmod(tmp_path, 0o755)
    data = Path(local_grid.endpoints[endpoint].data_dir)
    src = data / f"hn-down-{endpoint}" / "src"
    names = LEGAL + QUESTION + ["ctl\x01x"]
    make_tree(src, names)
    os.chmod(src.parent, 0o755)
    dst = {"LOC1": tmp_path / "area" / "out1" / "d", "LOC2": tmp_path / "area" / "out2" / "d"}
    canaries = plant_canaries(src, *dst.values())
    before = snapshot(tmp_path / "area", data)
    campaign = f"hn-down-{endpoint}"
    run_campaign(tmp_path, campaign, f"{endpoint}/hn-down-{endpoint}/src/", [
        ("LOC1", f"file://{dst['LOC1']}/", 1), ("LOC2", f"file://{dst['LOC2']}/", 2)], capsys)
    good = set(LEGAL) if endpoint == "t0-xrd" else set(LEGAL + QUESTION)
    check_outcome(local_grid_home, campaign, dst, {"LOC1": good, "LOC2": good}, names)
    assert_only_destinations_changed(before, snapshot(tmp_path / "area", data),
                                     dst.values(), canaries)
    for d in dst.values():
        assert_normal_mode(d)


def assert_normal_mode(d: Path) -> None:
    """file:// destinations get a normal file's mode (0644 minus the umask), not 0755."""
    umask = os.umask(0)
    os.umask(umask)
    for p in d.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o644 & ~umask, (p, oct(p.stat().st_mode))


def test_symlink_out_of_the_source_is_not_followed(gridxfer_home, tmp_path):
    """A link in the source directory to a file outside it, and a destination
    subdirectory that is a link out of the destination: both fail with bad_name."""
    os.chmod(tmp_path, 0o755)
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_tree(src, ["ok", "bad\nname"])
    make_tree(src / "sub", ["x"])
    (tmp_path / "secret").write_bytes(CANARY)
    os.symlink(tmp_path / "secret", src / "link")
    (tmp_path / "elsewhere").mkdir()
    dst.mkdir()
    os.symlink(tmp_path / "elsewhere", dst / "sub")
    spec = tmp_path / "c.yaml"
    spec.write_text(
        f'campaign: hn-link\nsource: {{url: "file://{src}/", files: {{recursive: true}}}}\n'
        f'destinations:\n  - {{tier: LOC, pool: ["file://{dst}/"]}}\n'
        f"retries: {{max: 0, backoff: 0.1s}}\n"
    )
    assert main(["campaign", "run", "--quiet", str(spec)]) == 3
    by = {r["name"]: r for r in rows(gridxfer_home, "hn-link")}
    assert by["ok"]["state"] == "done" and (dst / "ok").read_bytes() == content("ok")
    for n in ("link", "sub/x"):
        assert (by[n]["state"], by[n]["error_class"]) == ("failed", "bad_name"), dict(by[n])
        assert "resolves outside" in by[n]["error_msg"]
    assert list((tmp_path / "elsewhere").iterdir()) == []
    assert not (dst / "link").exists()
    assert (by["bad\nname"]["state"], by["bad\nname"]["error_class"]) == ("failed", "bad_name")
    # --retry-failed dispatches them again: the check before every copy refuses them again
    assert main(["campaign", "resume", "--quiet", "--retry-failed", "hn-link"]) == 3
    again = {r["name"]: r for r in rows(gridxfer_home, "hn-link")}
    for n in ("link", "sub/x", "bad\nname"):
        assert (again[n]["state"], again[n]["error_class"]) == ("failed", "bad_name"), n
    assert again["bad\nname"]["attempts"] == 1  # dispatched, and refused by attempt.py
    assert list((tmp_path / "elsewhere").iterdir()) == [] and sorted(os.listdir(dst)) == [
        "ok",
        "sub",
    ]


def _ftp_stor(url: str, name: str, data: bytes) -> None:
    """STOR ``name`` (sent as UTF-8) on the anonymous server of ``url`` (its data dir)."""
    import ftplib
    import io
    from urllib.parse import urlsplit
    parts = urlsplit(url)
    ftp = ftplib.FTP(encoding="utf-8")
    ftp.connect(parts.hostname, parts.port, timeout=10)
    try:
        ftp.login("anonymous", "gridxfer@")
        ftp.storbinary(f"STOR {parts.path}{name}", io.BytesIO(data))
    finally:
        ftp.close()


def test_ftp_refuses_non_ascii_names_its_server_would_store_under_another(
        local_grid, local_grid_home, tmp_path, capsys):
    """globus-gridftp-server drops every byte outside 32-126 from a clear-text command:
    'STOR é5.txt' writes '5.txt' (so 'ä1.txt' once landed as '1.txt', two names collided
    and `campaign verify` passed). Uploads and downloads over ftp:// refuse such names
    (bad_name, planned failed, never sent); ASCII names beside them are copied as usual."""
    os.chmod(tmp_path, 0o755)
    ep = local_grid.endpoints["t1b-ftp"]
    data = Path(ep.data_dir)
    (data / "hn-ftp-why").mkdir(exist_ok=True)
    os.chmod(data / "hn-ftp-why", 0o777)
    _ftp_stor(ep.url + "hn-ftp-why/", "\u00e95.txt", b"x")        # why the rule exists
    assert os.listdir(data / "hn-ftp-why") == ["5.txt"]

    src = tmp_path / "area" / "src"
    up = ["\u00e41.txt", "1.txt", "a b", "\u00f61.txt"]
    make_tree(src, up)
    (data / "hn-ftp-up").mkdir(exist_ok=True)
    os.chmod(data / "hn-ftp-up", 0o777)
    run_campaign(tmp_path, "hn-ftp-up", f"file://{src}/",
                 [("FTP", "t1b-ftp/hn-ftp-up/d/", 1), ("LOC", f"file://{tmp_path}/area/loc/", 1)],
                 capsys)
    legal = {"FTP": {"1.txt", "a b"}, "LOC": set(up)}
    check_outcome(local_grid_home, "hn-ftp-up", {"FTP": data / "hn-ftp-up" / "d",
                                                 "LOC": tmp_path / "area" / "loc"}, legal, up)
    by = {(r["tier"], r["name"]): r for r in rows(local_grid_home, "hn-ftp-up")}
    assert by[("FTP", "\u00e41.txt")]["attempts"] == 0          # refused at plan time
    assert "ftp:// cannot carry a non-ASCII" in by[("FTP", "\u00e41.txt")]["error_msg"]

    down = data / "hn-ftp-down"
    make_tree(down, ["\u00e42.txt", "2.txt"])
    os.chmod(down, 0o755)
    dst = tmp_path / "area" / "down"
    run_campaign(tmp_path, "hn-ftp-down", "t1b-ftp/hn-ftp-down/",
                 [("LOC", f"file://{dst}/", 1)], capsys)
    check_outcome(local_grid_home, "hn-ftp-down", {"LOC": dst}, {"LOC": {"2.txt"}},
                  ["\u00e42.txt", "2.txt"])


def test_names_up_to_name_max_arrive_whole(local_grid, local_grid_home, tmp_path, capsys):
    """Names of 231 to 255 bytes: their temporary names ('.<name>.gxpart-<token>') were
    longer than NAME_MAX, so every attempt failed with ENAMETOOLONG, retried for minutes as
    class other. Now each arrives under its own name on XRootD, GridFTP (gridxfer's client,
    globus-url-copy) and local disk, and no temporary name is left."""
    os.chmod(tmp_path, 0o755)
    src = tmp_path / "area" / "src"
    names = ["L" * 254, "\u00e4" * 127 + "x", "M" * 231 + ".root", "N" * 255]
    make_tree(src, names)
    xrd, gs = (Path(local_grid.endpoints[e].data_dir) for e in ("t1a-xrd1", "t1a-gsiftp"))
    dst = {"XRD": xrd / "hn-long" / "d", "GS1": gs / "hn-long1" / "d",
           "GS2": gs / "hn-long2" / "d", "LOC": tmp_path / "area" / "dst"}
    for d in (xrd / "hn-long", gs / "hn-long1", gs / "hn-long2"):
        d.mkdir(exist_ok=True)
        os.chmod(d, 0o777)
    run_campaign(tmp_path, "hn-long", f"file://{src}/", [
        ("XRD", "t1a-xrd1/hn-long/d/", 1), ("GS1", "t1a-gsiftp/hn-long1/d/", 1),
        ("GS2", "t1a-gsiftp/hn-long2/d/", 2), ("LOC", f"file://{dst['LOC']}/", 1)], capsys,
        expect=0)
    check_outcome(local_grid_home, "hn-long", dst, {t: set(names) for t in dst}, names)
    assert all(r["attempts"] == 1 for r in rows(local_grid_home, "hn-long"))
