"""Profiles exported as Ansible variables for ``playbooks/tune.yml`` (includes resolved).

Every string value is written with YAML's ``!unsafe`` tag, which Ansible documents ("Advanced
playbook syntax: Unsafe or raw strings") as never templated: a value such as
``{{ lookup('pipe', ...) }}`` stays text instead of running on the controller. The profile
parser already refuses template syntax; this holds for values that bypass it (values read
back from a host, vars files edited by hand, anything the CLI passes to Ansible).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gridxfer.tuning.profile import NIC_PREFIX, Profile, list_profiles, load_profile

VARS_DIR = Path(__file__).resolve().parents[3] / "playbooks" / "vars"


class _Unsafe(str):
    """A string that is dumped as ``!unsafe '...'``."""


class _UnsafeDumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        """Sequences indented under their key, as yamllint (and so ansible-lint) wants."""
        return super().increase_indent(flow, False)


_UnsafeDumper.add_representer(
    _Unsafe, lambda dumper, data: dumper.represent_scalar("!unsafe", str(data), style="'"))


def _mark(obj: Any) -> Any:
    if isinstance(obj, str):
        return _Unsafe(obj)
    if isinstance(obj, dict):
        return {k: _mark(v) for k, v in obj.items()}       # keys are variable names: plain
    if isinstance(obj, (list, tuple)):
        return [_mark(v) for v in obj]
    return obj


def unsafe_yaml(variables: dict) -> str:
    """Ansible variables as YAML with every string value tagged ``!unsafe``."""
    return yaml.dump(_mark(variables), Dumper=_UnsafeDumper, sort_keys=False,
                     default_flow_style=False, allow_unicode=False)


def ansible_vars(profile: Profile) -> dict:
    return {
        "gridxfer_profile": profile.name,
        "gridxfer_sysctl": [{"name": s.key, "value": s.value, "optional": s.optional}
                            for s in profile.sysctl],
        "gridxfer_nic": [{"param": s.key[len(NIC_PREFIX):], "value": s.value}
                         for s in profile.nic],
    }


def ansible_vars_yaml(profile: Profile) -> str:
    head = (f"---\n# Generated from {Path(profile.path).name} by "
            f"`gridxfer tune show {profile.name} --ansible-vars`; do not edit.\n")
    return head + unsafe_yaml(ansible_vars(profile))


def export_bundled(dest: Path = VARS_DIR) -> list[Path]:
    """Regenerate playbooks/vars/<profile>.yml for every bundled profile."""
    out = []
    for path in list_profiles():
        target = dest / f"{path.stem}.yml"
        target.write_text(ansible_vars_yaml(load_profile(str(path))), encoding="utf-8")
        out.append(target)
    return out
