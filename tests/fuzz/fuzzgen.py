"""Seeded generators of malformed inputs for the fuzz suite (tests/fuzz/test_fuzz_*.py).

Every generator takes a ``random.Random`` and valid bytes (an example file) and returns
mutated bytes; the same seed always gives the same inputs. The mutations are the ones
that printed tracebacks in the past: byte flips, NUL, invalid UTF-8, truncation, nesting
thousands of levels deep, huge / infinite / NaN / unicode numbers, wrong types, unknown
and duplicate keys, YAML tags and aliases.
"""
from __future__ import annotations

import random
import re
from collections.abc import Callable

Mutator = Callable[[random.Random, bytes], bytes]

NUMBERS = [".inf", "-.inf", ".nan", ".NaN", "1e400", "-1e400", "1e-400", "9" * 400,
           "9" * 400 + "MB", "9" * 400 + "s", "1" + "0" * 30 + "GiB", "\u00b2", "\u00b23",
           "\u0663", "\u0663MB", "\uff11\uff12", "\u2167", "-1", "-0.0", "0", "0x10", "1_000",
           "nan", "inf", "infs", "NaNMB", "1e308MB", "1e309", "99999999999999999999",
           "3.5", "1.", ".5", "+5", "1e5", "2 MB", "10**9", "\u0661\u0662s", "1\u00a0MB"]
WRONG_TYPES = ["[]", "{}", "null", "~", "true", "[1, 2]", "{a: 1}", '""', "''", "!!binary AAAA",
               "!!timestamp 2001-12-14", "!!python/object:os.system ls", "&a [*a]", "*nope",
               "!!float x", "!!int x", "? [a]", "2001-12-14", "0o777", "|\n  x\n", "- - -"]
BAD_UTF8 = [b"\xff", b"\xfe\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80",
            b"\xe2\x82", b"\xc0\xaf"]
_VALUE_RE = re.compile(rb"(?m)(\b[A-Za-z_][A-Za-z0-9_.]*\s*[:=]\s*)([^,}\]\n#]+)")


def _pos(rnd: random.Random, data: bytes) -> int:
    return rnd.randrange(len(data) + 1)


def byte_flip(rnd: random.Random, data: bytes) -> bytes:
    if not data:
        return b"\xff"
    out = bytearray(data)
    for _ in range(rnd.randint(1, 4)):
        i = rnd.randrange(len(out))
        out[i] ^= 1 << rnd.randrange(8)
    return bytes(out)


def insert_nul(rnd: random.Random, data: bytes) -> bytes:
    i = _pos(rnd, data)
    return data[:i] + b"\0" * rnd.choice((1, 1, 3)) + data[i:]


def invalid_utf8(rnd: random.Random, data: bytes) -> bytes:
    i = _pos(rnd, data)
    return data[:i] + rnd.choice(BAD_UTF8) + data[i:]


def truncate(rnd: random.Random, data: bytes) -> bytes:
    return data[:rnd.randrange(len(data))] if data else data


def _replace_value(rnd: random.Random, data: bytes, new: bytes) -> bytes:
    hits = list(_VALUE_RE.finditer(data))
    if not hits:
        return data + b"\n" + new
    m = rnd.choice(hits)
    return data[:m.start(2)] + new + data[m.end(2):]


def weird_number(rnd: random.Random, data: bytes) -> bytes:
    return _replace_value(rnd, data, rnd.choice(NUMBERS).encode())


def wrong_type(rnd: random.Random, data: bytes) -> bytes:
    return _replace_value(rnd, data, rnd.choice(WRONG_TYPES).encode())


def deep_nesting(rnd: random.Random, data: bytes) -> bytes:
    depth = rnd.choice((1000, 3000, 5000))
    kind = rnd.choice(("list", "map", "mixed", "block"))
    if kind == "block":            # indentation, not brackets: "- - - ... x"
        return b"- " * depth + b"x\n" if rnd.random() < 0.5 else \
            b"".join(b" " * i + b"a:\n" for i in range(depth // 3)) + b" " * (depth // 3) + b"1\n"
    if kind == "list":
        nest = b"[" * depth + b"1" + b"]" * depth
    elif kind == "map":
        nest = b"{a: " * depth + b"1" + b"}" * depth
    else:
        nest = b"[{a: " * (depth // 2) + b"1" + b"}]" * (depth // 2)
    if rnd.random() < 0.3:
        return nest + b"\n"
    return _replace_value(rnd, data, nest)


def unknown_key(rnd: random.Random, data: bytes) -> bytes:
    lines = data.split(b"\n")
    i = rnd.randrange(len(lines) + 1)
    key = rnd.choice((b"bogus", b"max_actve", b"sourc", b"\xc3\xa9t\xc3\xa9", b"1", b"null"))
    return b"\n".join(lines[:i] + [key + b": 1"] + lines[i:])


def duplicate_line(rnd: random.Random, data: bytes) -> bytes:
    lines = data.split(b"\n")
    i = rnd.randrange(len(lines))
    return b"\n".join(lines[:i + 1] + [lines[i]] + lines[i + 1:])


def yaml_bomb(rnd: random.Random, data: bytes) -> bytes:
    """A small alias bomb (9 levels of 9): must be refused or bounded, never hang."""
    lines = [b"a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for k in range(1, 8):
        refs = b", ".join([b"*a%d" % (k - 1)] * 9)
        lines.append(b"a%d: &a%d [%s]" % (k, k, refs))
    return b"\n".join(lines) + b"\n" + data


def long_line(rnd: random.Random, data: bytes) -> bytes:
    return _replace_value(rnd, data, b"x" * rnd.choice((5000, 200_000)))


def control_chars(rnd: random.Random, data: bytes) -> bytes:
    i = _pos(rnd, data)
    return data[:i] + rnd.choice((b"\x1b[2J", b"\r", b"\x7f", b"\x0c", b"\t\t", b"\x85",
                                  "\u2028".encode(), "\ufeff".encode())) + data[i:]


MUTATORS: dict[str, Mutator] = {
    "byte_flip": byte_flip, "nul": insert_nul, "utf8": invalid_utf8, "truncate": truncate,
    "number": weird_number, "type": wrong_type, "nesting": deep_nesting,
    "unknown_key": unknown_key, "duplicate": duplicate_line, "bomb": yaml_bomb,
    "long_line": long_line, "control": control_chars,
}
TEXT_MUTATORS = {k: v for k, v in MUTATORS.items() if k not in ("bomb",)}


def mutations(seed: int, base: bytes, count: int,
              mutators: dict[str, Mutator] = MUTATORS) -> list[tuple[str, bytes]]:
    """``count`` (mutator name, mutated bytes), cycling through every mutator first."""
    rnd = random.Random(seed)
    names = sorted(mutators)
    out = []
    for i in range(count):
        name = names[i % len(names)] if i < len(names) else rnd.choice(names)
        data = mutators[name](rnd, base)
        if rnd.random() < 0.2:            # sometimes two mutations on top of each other
            data = mutators[rnd.choice(names)](rnd, data)
        out.append((name, data))
    return out


def sweep(base: bytes, values: list[str]) -> list[tuple[str, bytes]]:
    """Every value of ``values`` once, each in the next value slot of ``base`` (round robin):
    the systematic part of the fuzz, so that each weird number meets a real field."""
    hits = list(_VALUE_RE.finditer(base))
    out = []
    for i, value in enumerate(values):
        for k in (i, i + len(values) // 2):          # two slots per value
            m = hits[k % len(hits)]
            out.append((f"{m.group(1).decode(errors='replace').strip()} {value[:12]!r}",
                        base[:m.start(2)] + value.encode() + base[m.end(2):]))
    return out
