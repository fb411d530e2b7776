"""`gridxfer tune`: host tuning profiles. Parses and renders only; the core is gridxfer.tuning."""
from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import click

from gridxfer.cli.tune_calc import advise_cmd, plan_cmd
from gridxfer.errors import GridxferError, PartialFailure

HOST_HELP = """Target host; repeat for several. local (default) | netns:NAME |
ssh:[USER@]HOST[:PORT] | ansible:NAME or a bare inventory NAME (needs --inventory)."""


def _jsonable(obj):
    if dataclasses.is_dataclass(obj):
        out = {f.name: _jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        for prop in ("ok", "changed", "skipped"):
            if isinstance(getattr(type(obj), prop, None), property) and prop not in out:
                out[prop] = _jsonable(getattr(obj, prop))
        return out
    if isinstance(obj, (list, tuple)):
        return [_jsonable(x) for x in obj]
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    return obj


def _emit_json(obj) -> None:
    click.echo(json.dumps(_jsonable(obj), indent=2, sort_keys=True))


def host_options(f):
    @click.option("--host", "hosts", multiple=True, default=("local",), show_default=True,
                  help=HOST_HELP)
    @click.option("--inventory", "-i", type=click.Path(dir_okay=False),
                  help="Ansible inventory for inventory host names.")
    @click.option("--iface", "ifaces", multiple=True,
                  help="Interface(s) for the NIC settings (txqueuelen, mtu, rings, pause, "
                       "coalesce); without it NIC settings are skipped.")
    @click.option("--skip-global", is_flag=True,
                  help="Skip keys that are not the target network namespace's own (global "
                       "ones: fs.*, kernel.*, vm.*, net.core.rmem_max, ...) instead of refusing "
                       "the whole profile.")
    @click.option("--ssh-key", type=click.Path(dir_okay=False), help="Private key for ssh: hosts.")
    @click.option("--known-hosts", type=click.Path(dir_okay=False),
                  help="known_hosts file for ssh: hosts (default ~/.ssh/known_hosts).")
    @click.option("--accept-unknown-host-key", is_flag=True,
                  help="Trust and record an ssh host key not in known_hosts (refused otherwise).")
    @click.option("--sudo/--no-sudo", default=None,
                  help="Run remote commands with sudo -n (default: unless the user is root).")
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    @functools.wraps(f)
    def wrapper(*args, hosts, inventory, ssh_key, known_hosts, accept_unknown_host_key, sudo,
                **kwargs):
        from gridxfer.tuning.hosts import SshOptions
        kwargs["target_args"] = dict(
            inventory=inventory,
            ssh=SshOptions(ssh_key, known_hosts, accept_unknown_host_key, sudo))
        return f(*args, hosts=hosts, **kwargs)
    return wrapper


def _for_each_host(hosts, target_args, action):
    """Run ``action(target)`` per host. One host: its error propagates; several: exit 3."""
    from gridxfer.tuning.hosts import make_target
    targets = [make_target(h, **target_args) for h in hosts]     # bad --host: exit 2 first
    results, errors = [], []
    for target in targets:
        try:
            with target:
                results.append(action(target))
        except GridxferError as exc:
            if len(targets) == 1:
                raise
            errors.append((target.label, exc))
            click.echo(f"gridxfer: error: {exc}", err=True)
    if errors:
        if not results:
            raise errors[0][1]
        raise PartialFailure(f"{len(errors)} of {len(targets)} hosts failed")
    return results


@click.group(name="tune")
def group() -> None:
    """Host tuning profiles: sysctl.d files plus NIC settings, applied all-or-nothing.

    \b
    Hosts (--host, repeatable):
      local                    this host (default)
      netns:NAME               a network namespace on this host
      ssh:[USER@]HOST[:PORT]   paramiko, key auth, known_hosts checked, sudo -n unless root
      ansible:NAME | NAME      an inventory host via playbooks/tune.yml (needs --inventory)
    Originals are saved in $GRIDXFER_HOME/tuning/<host>.json before anything is written.
    """


@group.command("list")
@click.option("--json", "as_json", is_flag=True)
def list_cmd(as_json: bool) -> None:
    """The available profiles."""
    from gridxfer.tuning.profile import list_profiles, load_profile
    profiles = [load_profile(str(p)) for p in list_profiles()]
    if as_json:
        _emit_json([{"name": p.name, "path": p.path, "source": p.source, "intent": p.intent,
                     "includes": list(p.includes), "settings": len(p.settings)} for p in profiles])
        return
    for p in profiles:
        inc = f" (includes {', '.join(p.includes)})" if p.includes else ""
        click.echo(f"{p.name:<18} {p.intent.split(';')[0][:70]}{inc}")


@group.command("show")
@click.argument("profile")
@click.option("--ansible-vars", is_flag=True, help="Print the profile as playbooks/tune.yml vars.")
@click.option("--json", "as_json", is_flag=True)
def show_cmd(profile: str, ansible_vars: bool, as_json: bool) -> None:
    """Every setting of PROFILE (includes resolved) and where it comes from."""
    from gridxfer.tuning.profile import load_profile
    p = load_profile(profile)
    if ansible_vars:
        from gridxfer.tuning.export import ansible_vars_yaml
        click.echo(ansible_vars_yaml(p), nl=False)
    elif as_json:
        _emit_json(p)
    else:
        click.echo(f"# {p.name}  ({p.path})\n# source: {p.source}\n# intent: {p.intent}")
        if p.includes:
            click.echo(f"# includes: {', '.join(p.includes)}")
        for s in p.settings:
            opt = " (optional)" if s.optional else ""
            click.echo(f"{s.key} = {s.value}{opt}    # {Path(s.path).name}:{s.line}")


def _print_items(label: str, items) -> None:
    marks = {"same": " ", "change": "~", "skipped": "-", "invalid": "!"}
    click.echo(f"== {label}")
    for i in items:
        cur = "(none)" if i.current is None else " ".join(i.current.split())
        note = f"  [{i.status}: {i.reason}]" if i.reason else ""
        click.echo(f"{marks[i.status]} {i.key}: {cur} -> {i.expected}{note}")


def _warn_crashed(target) -> None:
    from gridxfer.tuning import state as tstate
    st = tstate.load(target.state_id)
    if st and st.status == tstate.APPLYING:
        click.echo(
            f"gridxfer: warning: an apply of {st.profile} on {target.label} stopped "
            f"half-way; `gridxfer tune rollback --host {target.label}` restores it",
            err=True,
        )


@group.command("diff")
@click.argument("profile")
@host_options
def diff_cmd(profile, hosts, ifaces, skip_global, as_json, target_args) -> None:
    """Current value vs PROFILE, key by key (~ change, - skipped, ! cannot apply)."""
    from gridxfer.tuning.diff import diff
    from gridxfer.tuning.profile import load_profile
    p = load_profile(profile)

    def one(t):
        _warn_crashed(t)
        items = diff(p, t, ifaces=ifaces, skip_global=skip_global)
        if not as_json:
            _print_items(t.label, items)
        return {"host": t.label, "profile": p.name, "items": items}
    out = _for_each_host(hosts, target_args, one)
    if as_json:
        _emit_json(out)


@group.command("apply")
@click.argument("profile")
@host_options
@click.option("--dry-run", is_flag=True, help="Validate and show what would change; write nothing.")
@click.option("--persist", is_flag=True,
              help="Also write /etc/sysctl.d/90-gridxfer-PROFILE.conf ($GRIDXFER_SYSCTL_DIR).")
@click.option("--force", is_flag=True,
              help="Allow MTU/ring changes on the interface carrying the SSH session.")
def apply_cmd(profile, hosts, ifaces, skip_global, as_json, target_args, dry_run, persist,
              force) -> None:
    """Apply PROFILE all-or-nothing: validate, save originals, write, read back, verify."""
    from gridxfer.tuning.diff import ValidationError
    from gridxfer.tuning.engine import apply
    from gridxfer.tuning.profile import load_profile
    p = load_profile(profile)

    def one(t):
        try:
            res = apply(p, t, dry_run=dry_run, persist=persist, ifaces=ifaces,
                        skip_global=skip_global, force=force)
        except ValidationError as exc:
            if exc.items and not as_json:       # show what is in the way, then the one line
                _print_items(t.label + " (nothing written)", exc.items)
            raise
        if not as_json:
            _print_items(t.label + (" (dry run)" if dry_run else ""), res.items)
            verb = "would change" if dry_run else "changed"
            extra = f"; persisted to {res.persisted}" if res.persisted and not dry_run else ""
            click.echo(f"{verb} {len(res.changed)}, skipped {len(res.skipped)}{extra}")
        return res
    out = _for_each_host(hosts, target_args, one)
    if as_json:
        _emit_json(out)


@group.command("verify")
@click.argument("profile")
@host_options
def verify_cmd(profile, hosts, ifaces, skip_global, as_json, target_args) -> None:
    """Check that PROFILE is in force; exit 1 on drift."""
    from gridxfer.tuning.engine import DriftDetected, verify
    from gridxfer.tuning.profile import load_profile
    p = load_profile(profile)
    results = _for_each_host(hosts, target_args,
                             lambda t: verify(p, t, ifaces=ifaces, skip_global=skip_global))
    if as_json:
        _emit_json(results)
    else:
        for r in results:
            state = "OK" if r.ok else f"DRIFT in {len(r.drifted)} of {r.checked}"
            click.echo(f"{r.host}: {p.name}: {state}")
            for d in r.drifted:
                click.echo(f"  {d.key}: expected {d.expected}, actual "
                           f"{'(none)' if d.actual is None else ' '.join(d.actual.split())}")
    drifted = [r.host for r in results if not r.ok]
    if drifted:
        raise DriftDetected(f"{p.name}: drift on {', '.join(drifted)}")


@group.command("rollback")
@host_options
@click.option("--dry-run", is_flag=True, help="Show what would be restored.")
def rollback_cmd(hosts, ifaces, skip_global, as_json, target_args, dry_run) -> None:
    """Restore the originals saved by apply, in reverse order (also after a crash)."""
    from gridxfer.tuning.engine import rollback
    results = _for_each_host(hosts, target_args, lambda t: rollback(t, dry_run=dry_run))
    if as_json:
        _emit_json(results)
    else:
        for r in results:
            verb = "would restore" if r.dry_run else "restored"
            click.echo(f"{r.host}: {verb} {len(r.restored)} value(s) saved before {r.profile}")
            for o in r.restored:
                click.echo(f"  {o.key} = {' '.join(o.value.split())}")
            for path in r.files:
                click.echo(
                    f"  {'would undo' if r.dry_run else 'undid'} {path} (written by --persist)"
                )
            for key, msg in r.failed:
                click.echo(f"  FAILED {key}: {msg}")
    if any(not r.ok for r in results):
        raise GridxferError("rollback incomplete; the originals are kept for another try")


# advise and plan: arithmetic, no host (tune_calc.py)
group.add_command(advise_cmd)
group.add_command(plan_cmd)
