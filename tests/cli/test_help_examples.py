"""Every command's --help has an "Examples:" section (cli/examples.py), and every example
in it is a command line that command takes: its options exist, its values are of their
types, no argument is missing or extra. One walk over the whole click tree, so a new
command without examples, or an option renamed under an example, fails here."""
from __future__ import annotations

import re
import shlex

import click
import pytest

from gridxfer.cli.examples import EXAMPLES
from gridxfer.cli.main import cli


def _leaves() -> dict[str, tuple[click.Command, click.Context]]:
    out: dict[str, tuple[click.Command, click.Context]] = {}

    def walk(cmd: click.Command, path: str, ctx: click.Context) -> None:
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None, name
                walk(sub, f"{path} {name}".strip(),
                     click.Context(sub, parent=ctx, info_name=name))
        else:
            out[path] = (cmd, ctx)
    walk(cli, "", click.Context(cli, info_name="gridxfer"))
    return out


LEAVES = _leaves()


def _section(path: str, text: str | None = None) -> list[str]:
    """The Examples section of ``path``'s help (``text``, or the leaf command's)."""
    if text is None:
        cmd, ctx = LEAVES[path]
        text = cmd.get_help(ctx)
    assert "\n  Examples:\n" in text, f"gridxfer {path} --help has no Examples: section"
    return text.split("\n  Examples:\n", 1)[1].split("\nOptions:", 1)[0].splitlines()


def _command_lines(lines: list[str]) -> list[str]:
    """The example's shell lines: continuations joined, comments off."""
    joined, out = "", []
    for line in (ln.strip() for ln in lines):
        if not line or line.startswith("#"):
            continue
        joined += line
        if joined.endswith("\\"):
            joined = joined[:-1] + " "
            continue
        out.append(joined.split("  #", 1)[0].strip())
        joined = ""
    return out


def _invocations(line: str) -> list[list[str]]:
    """Each `gridxfer ...` in a shell line (also inside $(...) or after a pipe)."""
    return [shlex.split(m.group(1)) for m in re.finditer(r"\bgridxfer ([^|&;>)\"]+)", line)]


def _parse(path: str, args: list[str]) -> None:
    """``args`` through ``path``'s own parser, and each value through its type (a file's
    path is not looked at: the example's files are a site's, not this machine's)."""
    cmd, parent = LEAVES[path]
    ctx = click.Context(cmd, info_name=path.split()[-1], parent=parent.parent,
                        **cmd.context_settings)
    values, rest, _ = cmd.make_parser(ctx).parse_args(args=list(args))
    assert not rest, f"gridxfer {path}: extra arguments {rest}"
    for param in cmd.params:
        value = values.get(param.name)
        if value is None or not isinstance(value, (str, list, tuple, bool, int)):
            assert not param.required, f"gridxfer {path}: {param.name} missing"
            continue
        if not isinstance(param.type, click.Path):
            param.type_cast_value(ctx, value)


@pytest.mark.parametrize("path", sorted(LEAVES))
def test_every_command_has_examples_of_itself(path):
    commands = [shlex.split(line) for line in _command_lines(_section(path))]
    assert any(" ".join(argv).find(f"gridxfer {path}") >= 0 for argv in commands), \
        f"no example of gridxfer {path} in its --help"


def _parse_examples(section: list[str]) -> int:
    """Every `gridxfer ...` of an Examples section through its leaf command's parser;
    how many there were."""
    n = 0
    for line in _command_lines(section):
        for argv in _invocations(line):
            sub = max((p for p in LEAVES if argv[:len(p.split())] == p.split()),
                      key=len, default=None)
            assert sub is not None, f"not a gridxfer command: {line}"
            try:
                _parse(sub, argv[len(sub.split()):])
            except click.ClickException as exc:
                pytest.fail(f"{line}: {exc.format_message()}")
            n += 1
    return n


@pytest.mark.parametrize("path", sorted(LEAVES))
def test_every_example_parses_against_its_command(path):
    assert _parse_examples(_section(path)) >= 1


GROUPS = ("", "campaign", "tune", "netbench")     # testbed's: its "Typical use:"


def _group_help(path: str) -> str:
    ctx = click.Context(cli, info_name="gridxfer")
    cmd: click.Command = cli
    for name in path.split():
        sub = cmd.get_command(ctx, name)      # type: ignore[attr-defined]
        assert sub is not None
        cmd, ctx = sub, click.Context(sub, parent=ctx, info_name=name)
    return cmd.get_help(ctx)


@pytest.mark.parametrize("path", GROUPS)
def test_gridxfer_and_its_groups_show_how_they_are_used_and_every_line_parses(path):
    """`gridxfer --help` shows a site's first hour; each group, its commands together.
    Every line is a command line its leaf command takes."""
    text = _group_help(path)
    assert _parse_examples(_section(path, text)) >= 3
    assert [ln for ln in text.splitlines() if len(ln) > 100] == []


def test_every_example_names_a_command_and_fits_the_help_width():
    assert set(EXAMPLES) <= set(LEAVES) | set(GROUPS), set(EXAMPLES) - set(LEAVES)
    for path in LEAVES:
        cmd, ctx = LEAVES[path]
        too_wide = [ln for ln in cmd.get_help(ctx).splitlines() if len(ln) > 100]
        assert too_wide == [], (path, too_wide)


def test_a_broken_example_is_caught():
    """The parse above can fail: an unknown option, a bad value, a missing argument."""
    for path, argv in (("copy", ["--streamz", "4", "a", "b"]), ("copy", ["-t", "soon", "a", "b"]),
                       ("campaign resume", []), ("tune plan", ["--rate", "fast"])):
        with pytest.raises((click.ClickException, AssertionError)):
            _parse(path, argv)
