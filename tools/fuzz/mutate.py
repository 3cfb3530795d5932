"""Mutations of valid inputs: byte edits, and edits of the numbers, words and separators that
text formats are made of. Each takes its choices from a `random.Random`, so a run is replayed
from its seed (and Hypothesis drives the same functions with the choices it draws)."""

from __future__ import annotations

import copy
import json
import random
import re
from typing import Any

# Values at the edges of what readers and the engine hold: zero, signs, 31/32/53/62/63/64-bit
# limits, floats past every range, non-numbers, other scripts' digits, separators.
INTERESTING = [
    "0", "-0", "1", "-1", "2", "7", "255", "256", "65535", "65536", "2147483647", "2147483648", "4294967295",
    "4294967296", "9007199254740993", "4611686018427387904", "9223372036854775807", "9223372036854775808",
    "18446744073709551615", "18446744073709551616", "1" + "0" * 400, "0.5", "-0.5", "1e-9", "1e308", "1e309",
    "-1e309", "NaN", "nan", "Infinity", "-inf", "inf", "1_000", "0x10", "0o17", "0b101", "010", "8:20", "٣",
    "²", "１２", "true", "false", "null", "~", "", " ", '""', "[]", "{}", "[[[[[[[[[[]]]]]]]]]]", "'", '"', "\\",
    "\x00", "\ufeff", "é", "KiB", "Mb", "1.5MiB", "-1KB", "1e3KB", ",", ":", "=", "->", "#", "\n", "\r\n", "\t",
]
_TOKEN = re.compile(rb"-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|[A-Za-z_]+|[^\sA-Za-z0-9_]")


def _pick(rng: random.Random, n: int) -> int:
    return rng.randrange(n) if n else 0


def byte_edit(data: bytes, rng: random.Random) -> bytes:
    """Flip, insert, delete or duplicate bytes at a random place."""
    pos, op = _pick(rng, len(data) + 1), rng.randrange(5)
    if op == 0 and data:
        i = min(pos, len(data) - 1)
        return data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1:]
    if op == 1:
        return data[:pos] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 4))) + data[pos:]
    if op == 2:
        return data[:pos] + data[pos + rng.randint(1, 8):]
    if op == 3:
        end = min(len(data), pos + rng.randint(1, 64))
        return data[:end] + data[pos:end] * rng.randint(1, 3) + data[end:]
    return data[:pos]  # truncated


def token_edit(data: bytes, rng: random.Random) -> bytes:
    """Replace, delete or repeat one token (a number, a word or a punctuation mark), or put an
    interesting value in its place."""
    tokens = list(_TOKEN.finditer(data))
    if not tokens:
        return byte_edit(data, rng)
    m = tokens[rng.randrange(len(tokens))]
    op = rng.randrange(4)
    if op == 0:
        new = rng.choice(INTERESTING).encode()
    elif op == 1:
        new = b""
    elif op == 2:
        new = m.group() * 2
    else:
        new = tokens[rng.randrange(len(tokens))].group()  # another token of the same input
    return data[:m.start()] + new + data[m.end():]


def line_edit(data: bytes, rng: random.Random) -> bytes:
    """Delete, repeat or swap whole lines (CSV rows, connection-matrix flows, YAML keys)."""
    lines = data.split(b"\n")
    i, j = _pick(rng, len(lines)), _pick(rng, len(lines))
    op = rng.randrange(3)
    if op == 0 and len(lines) > 1:
        del lines[i]
    elif op == 1:
        lines.insert(i, lines[j])
    else:
        lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines)


def splice(data: bytes, other: bytes, rng: random.Random) -> bytes:
    """The start of one input and the end of another."""
    return data[:_pick(rng, len(data) + 1)] + other[_pick(rng, len(other) + 1):]


JSON_VALUES: list[Any] = [0, -1, 1, 2**31, 2**32, 2**53 + 1, 2**62, 2**63, 2**64, -2**63 - 1, 10**400, 0.5, -0.0,
                          1e308, float("inf"), float("nan"), "", "x", "0", "1MiB", True, False, None, [], {}, [0, 1],
                          {"": 1}, [[[[[]]]]], "é" * 3]


def _nodes(value: Any, out: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """(container, key) of every value inside `value`, depth first."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        out.append((value, k))
        _nodes(v, out)
    return out


def json_edit(data: bytes, rng: random.Random) -> bytes:
    """Replace, delete, duplicate or rename one value of a JSON document (text that is not JSON
    gets a token edit): deep inputs that still parse."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return token_edit(data, rng)
    nodes = _nodes(doc, [])
    if not nodes:
        return json.dumps(rng.choice(JSON_VALUES)).encode()
    other = nodes[rng.randrange(len(nodes))]
    graft = copy.deepcopy(other[0][other[1]])  # a copy: the document stays a tree
    parent, key = nodes[rng.randrange(len(nodes))]
    op = rng.randrange(4)
    if op == 0:
        parent[key] = copy.deepcopy(rng.choice(JSON_VALUES))
    elif op == 1:
        del parent[key]
    elif op == 2 and isinstance(parent, list):
        parent.insert(key, parent[key])
    elif op == 2:
        parent[f"{key}_"] = parent[key]
    else:
        parent[key] = graft
    return json.dumps(doc).encode()


EDITS = (byte_edit, token_edit, token_edit, line_edit, json_edit, json_edit)


def mutate(seeds: list[bytes], rng: random.Random, max_edits: int = 4) -> bytes:
    """A seed with 1..max_edits edits (one in half the inputs, two in a quarter, ...); sometimes
    spliced with another seed."""
    data = rng.choice(seeds)
    if rng.random() < 0.1:
        data = splice(data, rng.choice(seeds), rng)
    edits = 1
    while edits < max_edits and rng.random() < 0.5:
        edits += 1
    for _ in range(edits):
        data = rng.choice(EDITS)(data, rng)
    return data
