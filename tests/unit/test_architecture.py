"""docs/ARCHITECTURE.md is the map: every module of src/ is in it, the imports go the way it
says, and every GRIDXFER_* variable the code reads is in its table."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "gridxfer"
DOC = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")

# the "Import direction" list of the map, top to bottom
LAYERS = [
    ("cli",),
    ("campaign.runner", "campaign.preflight", "campaign.cancel", "campaign.verify",
     "campaign.reload", "campaign.dryrun", "campaign.probes", "campaign.results"),
    ("campaign.engine", "campaign.fts3"),
    ("campaign.report", "campaign.spec"),
    ("campaign.accounting",),
    ("campaign.policy",),
    ("campaign.journal",),
    ("movers.xrootd", "movers.gridftp", "movers.gfal"),
    ("movers", "auth"),
    ("errors", "units", "limits", "envsettings", "inputs", "display", "redact", "state",
     "__version__"),
]
SIDE = {"monitoring", "testbed", "tuning", "netbench"}
PROTOCOLS = {"movers.xrootd", "movers.gridftp", "movers.gfal"}


def modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def group(dotted: str) -> str:
    """The map's unit a module belongs to (``gridxfer.campaign.engine.feed`` ->
    ``campaign.engine``)."""
    parts = dotted.split(".")[1:]
    if not parts:
        return ""
    if parts[0] in ("campaign", "movers") and len(parts) > 1:
        sub = f"{parts[0]}.{parts[1]}"
        if parts[0] == "movers" and sub not in PROTOCOLS:
            return "movers"
        return sub
    return parts[0]


def layer(g: str) -> int | None:
    for i, names in enumerate(LAYERS):
        if g in names:
            return i
    return None


def imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module.startswith("gridxfer"):
                if node.module in ("gridxfer", "gridxfer.campaign", "gridxfer.movers"):
                    out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
                else:
                    out.append((node.lineno, node.module))
        elif isinstance(node, ast.ImportFrom) and node.level:
            out.append((node.lineno, "<relative>"))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("gridxfer")]
    return out


def dotted(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    name = ".".join(rel.parts)
    return name.removesuffix(".__init__")


def edge_allowed(src_mod: str, g: str, h: str) -> bool:
    if g == h or g in ("cli", "__main__") or h == "":
        return True
    lg, lh = layer(g), layer(h)
    if lg is not None and lh is not None:
        if g in PROTOCOLS and h in PROTOCOLS:
            return (g, h) == ("movers.gridftp", "movers.gfal")
        if g == "movers" and h in PROTOCOLS:
            return src_mod.rsplit(".", 1)[-1] in ("spool", "registry")
        return lh >= lg
    if g in SIDE and h in SIDE:
        return True
    if g in SIDE:                   # side packages use the journal, the movers and the bottom
        return lh is not None and lh >= layer("campaign.journal")
    # the campaign uses the testbed only to resolve endpoint names
    return h == "testbed" and g in ("campaign.spec", "campaign.runner")


def test_every_module_is_on_the_map():
    rows: dict[str, str] = {}
    for line in DOC.splitlines():
        m = re.match(r"\| `([\w/]+/)` \|(.*)", line) or re.match(r"\| (top level) \|(.*)", line)
        if m:
            rows[m.group(1)] = m.group(2)
    missing = []
    for path in modules():
        if path.name in ("__init__.py", "__main__.py"):
            continue
        rel = path.relative_to(SRC)
        folder = "top level" if len(rel.parts) == 1 else "/".join(rel.parts[:-1]) + "/"
        if not re.search(rf"`{re.escape(path.stem)}`", rows.get(folder, "")):
            missing.append(str(rel))
    assert not missing, f"modules missing from docs/ARCHITECTURE.md's folder table: {missing}"
    packages = {"/".join(p.relative_to(SRC).parts[:-1]) + "/" for p in modules()
                if len(p.relative_to(SRC).parts) > 1}
    assert not set(rows) - packages - {"top level"}, "the map names folders that do not exist"


def test_imports_go_the_way_the_map_says():
    bad = []
    for path in modules():
        me = dotted(path)
        for lineno, target in imports(path):
            if target == "<relative>":
                bad.append(f"{path.relative_to(SRC)}:{lineno}: relative import")
                continue
            if not edge_allowed(me, group(me), group(target)):
                bad.append(f"{path.relative_to(SRC)}:{lineno}: {group(me)} -> {target}")
    assert not bad, "imports against docs/ARCHITECTURE.md's direction:\n" + "\n".join(bad)


def test_the_layer_list_is_the_maps():
    section = DOC[DOC.index("## Import direction"):DOC.index("## Threads")]
    listed = re.findall(r"^\d+\. (.*)$", section, re.M)
    assert len(listed) == len(LAYERS)
    for text, names in zip(listed, LAYERS, strict=True):
        for name in names:
            if name != "__version__":
                assert f"`{name}`" in text, (name, text)


def test_every_environment_variable_is_in_the_table():
    used = set()
    for path in modules():
        used |= set(re.findall(r"GRIDXFER_[A-Z0-9_]+", path.read_text(encoding="utf-8")))
    table = DOC[DOC.index("## Environment variables"):]
    documented = set(re.findall(r"`(GRIDXFER_[A-Z0-9_]+)`", table))
    assert not used - documented, f"undocumented: {sorted(used - documented)}"
    assert not documented - used, f"documented but unused: {sorted(documented - used)}"


def test_the_direction_check_can_fail():
    """The rule itself: a policy module importing the engine, or the movers importing the
    campaign, is refused; the engine importing a policy is not."""
    assert not edge_allowed("gridxfer.campaign.policy.x", "campaign.policy", "campaign.engine")
    assert not edge_allowed("gridxfer.movers.urls", "movers", "campaign.journal")
    assert not edge_allowed("gridxfer.movers.xrootd.mover", "movers.xrootd", "movers.gfal")
    assert not edge_allowed("gridxfer.movers.urls", "movers", "movers.xrootd")
    assert edge_allowed("gridxfer.campaign.engine.x", "campaign.engine", "campaign.policy")
    assert edge_allowed("gridxfer.movers.spool", "movers", "movers.xrootd")


def test_test_modules_have_unique_names():
    """pytest imports test modules by their base name (no __init__.py, rootdir mode): two
    files of one name stop the whole run at collection ("import file mismatch")."""
    seen: dict[str, Path] = {}
    clashes = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        if path.name in seen:
            clashes.append(f"{seen[path.name].relative_to(ROOT)} and {path.relative_to(ROOT)}")
        seen.setdefault(path.name, path)
    assert not clashes, "test modules sharing a name: " + "; ".join(clashes)
