"""Parsing what the CLI and API accept as short strings: sizes like `128KiB`, and the
`kind:key=value,...` form of specs (`fat-tree:k=8`; the packet engine reads its topology and
traffic specs with these in `network_backends/packet/specs.py`); values shown in messages."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from .errors import ConfigError

_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
# A decimal number as a spec or file writes it: ASCII digits, no `_`, no nan/inf.
DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def shown(value: Any) -> str:
    """`repr(value)` for an error message, an integer of hundreds of digits summarized."""
    text = repr(value)
    return f"an integer of {len(text)} digits ({text[:6]}...)" if isinstance(value, int) and len(text) > 24 else text


def missing_ranks(ranks: Any, shown_at_most: int = 10) -> str:
    """The numbers below max(ranks) that `ranks` lacks, for a message ('' when none): the first
    few and a count of the rest, in time and memory linear in len(ranks), whatever the numbers."""
    first: list[int] = []
    total = expected = 0
    for r in sorted(ranks):
        if r > expected:
            first.extend(range(expected, min(r, expected + max(0, shown_at_most - len(first)))))
            total += r - expected
        expected = r + 1
    return f"{first}{f' and {total - len(first):,} more' if total > len(first) else ''}" if total else ""


def plain(value: Any) -> Any:
    """`value` with numpy scalars and arrays as Python numbers and lists, in dicts and lists
    too: sweeps pass `np.arange` values and DataFrame cells, and the engine reads JSON."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return plain(value.tolist())
    return value


def parse_size(text: str | int, field: str = "size") -> int:
    """Bytes from `1048576`, `1MiB`, `800KB`, `4 KiB` (SI and binary prefixes, any case but a
    final lowercase `b`: `1Mb` is a megabit and refused)."""
    if isinstance(text, int):
        value = text
    else:
        m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
        if m and m.group(2).endswith("b") and m.group(2)[:-1].upper() + "B" in _UNITS:
            # A lowercase b is a bit in networking (1 Mb = 125 KB): refused, not read as bytes.
            number, unit = m.group(1), m.group(2)[:-1].upper().replace("I", "i") + "B"
            hint = f"{number}{unit} or {number}{unit[0]}iB" if len(unit) == 2 else f"{number}{unit}"
            raise ConfigError(f"`{field}`: {text!r} would be bits (lowercase b); sizes are bytes: write {hint}", field)
        unit = m.group(2).upper() if m else None
        if not m or unit not in _UNITS:
            raise ConfigError(f"`{field}`: cannot read {text!r} as a size (expected e.g. 4096, 128KiB, 1MiB, 800KB; units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", field)
        number = m.group(1)
        # Exact decimal arithmetic: 16.1KB is 16,100 B, 1.0000000000000001KB is not whole bytes,
        # and sizes past 2^53 keep every digit.
        exact = Fraction(number) * _UNITS[unit]
        if exact.denominator != 1:
            raise ConfigError(f"`{field}`: {text!r} is not a whole number of bytes", field)
        value = int(exact)
    if not 0 < value <= 2**63:
        raise ConfigError(f"`{field}`: must be in 1..2^63 bytes, got {text!r}", field)
    return value


def split_spec(spec: str, what: str) -> tuple[str, dict[str, str]]:
    """`kind:key=value,key=value` -> (kind, {key: value})."""
    if not isinstance(spec, str):
        raise ConfigError(f"`{what}`: expected a spec string (e.g. fat-tree:k=8, permutation:size=1MiB) or a dict, "
                          f"got {type(spec).__name__}", what)
    kind, _, rest = spec.partition(":")
    kind = kind.strip().lower().replace("_", "-")
    if not kind:
        raise ConfigError(f"`{what}`: empty spec {spec!r}", what)
    if kind == "file":
        return kind, {"path": rest}
    params: dict[str, str] = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq:
            raise ConfigError(f"`{what}`: expected key=value in {spec!r}, got {item!r}", what)
        key = key.strip().replace("-", "_")
        if key in params:
            raise ConfigError(f"`{what}.{key}`: given twice in {spec!r}", f"{what}.{key}")
        params[key] = value.strip()
    return kind, params
