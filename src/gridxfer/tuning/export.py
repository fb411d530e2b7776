"""Profiles exported as Ansible variables for ``playbooks/tune.yml`` (includes resolved)."""
from __future__ import annotations

from pathlib import Path

import yaml

from .profile import NIC_PREFIX, Profile, list_profiles, load_profile

VARS_DIR = Path(__file__).resolve().parents[3] / "playbooks" / "vars"


def ansible_vars(profile: Profile) -> dict:
    return {
        "gridxfer_profile": profile.name,
        "gridxfer_sysctl": [{"name": s.key, "value": s.value, "optional": s.optional}
                            for s in profile.sysctl],
        "gridxfer_nic": [{"param": s.key[len(NIC_PREFIX):], "value": s.value}
                         for s in profile.nic],
    }


def ansible_vars_yaml(profile: Profile) -> str:
    head = (f"# Generated from {Path(profile.path).name} by "
            f"`gridxfer tune show {profile.name} --ansible-vars`; do not edit.\n")
    return head + yaml.safe_dump(ansible_vars(profile), sort_keys=False, default_flow_style=False)


def export_bundled(dest: Path = VARS_DIR) -> list[Path]:
    """Regenerate playbooks/vars/<profile>.yml for every bundled profile."""
    out = []
    for path in list_profiles():
        target = dest / f"{path.stem}.yml"
        target.write_text(ansible_vars_yaml(load_profile(str(path))), encoding="utf-8")
        out.append(target)
    return out
