"""Fuzz: malformed campaign files, list files, topologies and profiles (seeded, in-process).

Each family mutates the shipped examples (examples/*.yaml, examples/files.txt,
sysctl-profiles/*.conf|.nic) with the generators of fuzzgen.py and asserts the one-line
rule of fuzzrun.py: no traceback, the documented exit code, one line naming the file.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import jwt
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzzgen import MUTATORS, NUMBERS, TEXT_MUTATORS, WRONG_TYPES, mutations, sweep  # noqa: E402
from fuzzrun import Tally, judge_gx, run_gx  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PROFILES = ROOT / "sysctl-profiles"


def _local_campaigns(tmp: Path) -> dict[str, bytes]:
    """The campaign examples, with their remote sources pointed at a local directory (a
    dry run then lists nothing remote), plus a local file:// campaign."""
    src = tmp / "src"
    src.mkdir(exist_ok=True)
    for name in ("a.root", "b.root", "c.dat", "d.dat"):
        (src / name).write_bytes(b"x" * 100)
    (tmp / "files.txt").write_bytes((EXAMPLES / "files.txt").read_bytes())
    (tmp / "tokens").mkdir(exist_ok=True)
    for name in ("t0", "desy", "DESY2_TOKEN"):
        (tmp / "tokens" / name).touch(mode=0o600)
        (tmp / "tokens" / name).write_text(jwt.encode({"sub": "fuzz"}, "k" * 32) + "\n")
    out = {}
    for p in sorted(EXAMPLES.glob("*.yaml")):
        text = p.read_text()
        if not text.startswith(("campaign", "#")) or "campaign:" not in text:
            continue
        if "files: {from:" not in text:          # a listing: make it a local one
            text = re.sub(r'source: \{url: "[^"]*"', f'source: {{url: "file://{src}/"', text)
        # token files that give a token (a run refuses one that cannot, before the rest)
        text = re.sub(r"\{env: (\w+)\}", lambda m: f"{{file: {tmp}/tokens/{m[1]}}}",
                      text.replace("~/.tokens/", f"{tmp}/tokens/"))
        out[p.stem] = text.encode()
    out["local"] = f"""campaign: local
source: {{url: "file://{src}/", files: [a.root, {{name: b.root, size: 3MB, adler32: 0a1b2c3d}}]}}
destinations:
  - {{tier: T1, pool: ["file://{tmp}/dst/"], streams: 2, max_active: 2, tcp_buffer: 4MiB}}
checksum: {{algorithm: adler32, verify: both}}
retries: {{max: 1, backoff: 0.01s}}
timeout: 1h
overwrite: false
""".encode()
    return out


def test_campaign_files(tmp_path, home):
    bases = _local_campaigns(tmp_path)
    tally, same = Tally(), Tally()
    for bi, (base, data) in enumerate(sorted(bases.items())):
        cases = mutations(100 + bi, data, 45)
        if base in ("local", "sc-t0-t1"):
            cases += sweep(data, NUMBERS + WRONG_TYPES)
        for i, (mut, blob) in enumerate(cases):
            path = tmp_path / f"c-{base}-{i}.yaml"
            path.write_bytes(blob)
            case = f"campaign {base} #{i} {mut}"
            # --no-probe: the examples name remote hosts, never contacted by the tests
            dry = run_gx(["campaign", "run", "--dry-run", "--no-probe", "--quiet", str(path)])
            tally.add(case, dry, judge_gx(dry, {0, 2, 3}, (str(path), str(tmp_path / "files.txt"),
                                                         "file://")))
            if dry.code == 2:      # `run` fails where `--dry-run` fails, with the same line
                real = run_gx(["campaign", "run", "--quiet", str(path)])
                problem = judge_gx(real, {2}, (str(path), str(tmp_path / "files.txt"),
                                               "file://"))
                if problem is None and real.err != dry.err:
                    problem = f"run said {real.err!r}, --dry-run said {dry.err!r}"
                same.add(case + " (run)", real, problem)
    assert not list((home / "campaigns").glob("*.sqlite")) if (home / "campaigns").exists() \
        else True
    print(tally.report("campaign files (--dry-run)"))
    print(same.report("campaign files (run after a failed --dry-run)"))
    assert tally.cases >= 240 and not tally.problems, tally.report("campaign files")
    assert not same.problems, same.report("campaign run vs --dry-run")


def test_list_files(tmp_path, home):
    base = (EXAMPLES / "files.txt").read_bytes() + b"run2/c.root 4096 00000001\n"
    spec = tmp_path / "c.yaml"
    spec.write_text('campaign: lst\nsource: {url: "root://t0.example:1094//raw/", '
                    'files: {from: list.txt}}\ndestinations: [{tier: T1, pool: '
                    '["root://se.example:1094//data/"]}]\n')
    tally = Tally()
    for i, (mut, blob) in enumerate(mutations(7, base, 80, TEXT_MUTATORS)):
        (tmp_path / "list.txt").write_bytes(blob)
        o = run_gx(["campaign", "run", "--dry-run", "--no-probe", "--quiet", str(spec)])
        tally.add(f"list #{i} {mut}", o, judge_gx(o, {0, 2, 3}, (str(tmp_path / "list.txt"),)))
    print(tally.report("list files"))
    assert tally.cases >= 80 and not tally.problems, tally.report("list files")


def test_topologies(tmp_path, home):
    tally = Tally()
    bases = sorted(EXAMPLES.glob("topology-*.yaml"))
    extra = [
        (b"ipv6", b"name: v6\ntiers:\n  - {name: A, subnet: 'fd00::/64', hosts: [{name: a1}]}\n"),
        (b"ipv6-addr", b"name: v6\ntiers:\n  - {name: A, hosts: [{name: a1, address: '::1'}]}\n"),
        (
            b"v6-mapped",
            b"name: v6\ntiers:\n  - {name: A, subnet: '::ffff:198.18.1.0/120', "
            b"hosts: [{name: a1}]}\n",
        ),
    ]
    cases = [(f"{p.stem} #{i} {m}", blob) for bi, p in enumerate(bases)
             for i, (m, blob) in enumerate(mutations(200 + bi, p.read_bytes(), 30))]
    cases += [(f"sc sweep {m}", blob) for m, blob in
              sweep((EXAMPLES / "topology-sc.yaml").read_bytes(), NUMBERS + WRONG_TYPES)]
    cases += [(n.decode(), blob) for n, blob in extra]
    for i, (case, blob) in enumerate(cases):
        path = tmp_path / f"topo-{i}.yaml"
        path.write_bytes(blob)
        o = run_gx(["testbed", "up", "--dry-run", str(path)])
        tally.add(f"topology {case}", o, judge_gx(o, {0, 2}, (str(path),)))
        if case in ("ipv6", "ipv6-addr", "v6-mapped") and o.code != 2:
            tally.problems.append(f"{case}: an IPv6 topology must exit 2, got {o.code}")
    print(tally.report("topologies"))
    assert tally.cases >= 100 and not tally.problems, tally.report("topologies")


def test_profiles(tmp_path, home):
    tally = Tally()
    confs = sorted(PROFILES.glob("*.conf"))
    for bi, conf in enumerate(confs):
        nic = conf.with_suffix(".nic")
        for i, (mut, blob) in enumerate(mutations(300 + bi, conf.read_bytes(), 14, TEXT_MUTATORS)):
            d = tmp_path / f"p{bi}-{i}"
            d.mkdir()
            path = d / conf.name
            path.write_bytes(blob)
            if nic.exists():       # every other case mutates the .nic next to the .conf
                nic_blob = nic.read_bytes()
                if i % 2:
                    nic_blob = mutations(400 + i, nic_blob, 1, TEXT_MUTATORS)[0][1]
                path.with_suffix(".nic").write_bytes(nic_blob)
            o = run_gx(["tune", "show", str(path)])
            tally.add(f"profile {conf.stem} #{i} {mut}", o,
                      judge_gx(o, {0, 2}, (str(path), str(path.with_suffix(".nic")))))
    print(tally.report("profiles"))
    assert tally.cases >= 90 and not tally.problems, tally.report("profiles")


def test_generators_are_deterministic():
    data = (EXAMPLES / "sc-t0-t1.yaml").read_bytes()
    assert mutations(1, data, 30) == mutations(1, data, 30)
    assert mutations(1, data, 30) != mutations(2, data, 30)
    assert {name for name, _ in mutations(1, data, len(MUTATORS))} == set(MUTATORS)


@pytest.mark.parametrize("files", ['{glob: "*.nothing"}', '{recursive: true, glob: "*.no"}',
                                   '{from: empty.txt}'])
def test_dry_run_fails_where_run_fails(tmp_path, home, files):
    """A glob that matches nothing (or an empty list file): `run --dry-run` said "would
    transfer 0 files" and exit 0, where `run` exits 2."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.dat").write_bytes(b"a")
    (tmp_path / "empty.txt").write_text("# nothing\n")
    spec = tmp_path / "c.yaml"
    spec.write_text(f'campaign: c\nsource: {{url: "file://{tmp_path}/src/", files: {files}}}\n'
                    f'destinations: [{{tier: T1, pool: ["file://{tmp_path}/dst/"]}}]\n')
    dry = run_gx(["campaign", "run", "--dry-run", str(spec)])
    real = run_gx(["campaign", "run", "--quiet", str(spec)])
    assert judge_gx(dry, {2}) is None and judge_gx(real, {2}) is None, (dry, real)
    assert dry.err == real.err and "matched no files" in dry.err
    assert not (home / "campaigns" / "c.sqlite").exists()
